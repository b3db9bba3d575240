package observer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/kube"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
)

// CloudObserver reads what the planner needs from OpenStack for a plan:
// name resolutions, servers by name, keypairs, quota, and the resources
// ferry tagged. It authenticates with the clouds.yaml Secret the plan names.
type CloudObserver interface {
	ObserveCloud(ctx context.Context, p *v1alpha1.MigrationPlan) (*observed.Cloud, error)
	// Forget drops what it keeps about plan, which an openstack step may
	// have changed.
	Forget(plan string)
}

// Observer reads the state one plan is planned against. It only reads:
// its lists ask informer-backed clients not to copy (UnsafeDisableDeepCopy),
// so nothing it lists may be changed.
type Observer struct {
	// Client reads the management cluster.
	Client client.Client
	// Workload builds the workload cluster's client; nil uses
	// NewWorkloadClient.
	Workload kube.ClientFunc
	// Cloud reads OpenStack; nil leaves the cloud unobserved.
	Cloud CloudObserver
	// Manifests is the plans repository, where manifest paths are read
	// from when the context carries no tree (observed.WithRepo); nil
	// leaves manifests unobserved (not applied).
	Manifests fs.FS
	// WorkloadMaxAge is how long a plan's workload cluster observation is
	// reused; 0 reads it at every observation. A result of one of the
	// plan's steps ends it sooner (Forget): what ferry changes is seen at
	// once, a change by others within WorkloadMaxAge.
	WorkloadMaxAge time.Duration

	mu        sync.Mutex
	workloads map[string]cachedWorkload // by plan
}

type cachedWorkload struct {
	w  *observed.Workload
	at time.Time
}

// Forget drops what the observer keeps about plan that a step of the
// executor kind may have changed: its workload cluster, and its cloud
// after an openstack step.
func (o *Observer) Forget(plan string, executor step.Kind) {
	o.mu.Lock()
	delete(o.workloads, plan)
	o.mu.Unlock()
	if o.Cloud != nil && executor == step.OpenStack {
		o.Cloud.Forget(plan)
	}
}

// repo is the tree manifests are read from: the revision's that ctx
// carries, else Manifests.
func (o *Observer) repo(ctx context.Context) fs.FS {
	if fsys := observed.Repo(ctx); fsys != nil {
		return fsys
	}
	return o.Manifests
}

// Observe reads the snapshot for p, a validated and defaulted plan, and
// joins record (what ferry wrote to the plan's status before) to it. An
// error means the management cluster could not be read.
func (o *Observer) Observe(ctx context.Context, p *v1alpha1.MigrationPlan, record observed.Record) (*observed.Snapshot, error) {
	ns, name := p.Spec.Cluster.Namespace, p.Spec.Cluster.Name
	s := &observed.Snapshot{Record: record}
	var errs []error
	errs = append(errs, o.cluster(ctx, ns, name, s))
	errs = append(errs, o.secrets(ctx, p, s))
	errs = append(errs, o.controlPlane(ctx, p, s))
	errs = append(errs, o.machines(ctx, ns, name, s))
	errs = append(errs, o.names(ctx, ns, name, s))
	errs = append(errs, o.boundServers(ctx, ns, name, s))
	errs = append(errs, o.gateways(ctx, p, s))
	errs = append(errs, o.created(ctx, ns, name, p.Metadata.Name, s))
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("observe cluster %s/%s: %w", ns, name, err)
	}
	o.workload(ctx, p, s)
	if o.Cloud == nil {
		s.CloudError = "OpenStack not asked"
	} else if cloud, err := o.Cloud.ObserveCloud(ctx, p); err != nil {
		s.CloudError = err.Error()
	} else {
		s.Cloud = cloud
	}
	return s, nil
}

// get reads one object; found is false when it does not exist.
func (o *Observer) get(ctx context.Context, ns, name string, obj client.Object) (found bool, err error) {
	err = o.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get %T %s/%s: %w", obj, ns, name, err)
	}
	return true, nil
}

// indexed reports whether the client's lists can select by cluster
// (NewCachedClient).
func (o *Observer) indexed() bool {
	_, ok := o.Client.(interface{ clusterIndexed() })
	return ok
}

// listCluster lists the objects in ns that belong to cluster (ClusterOf)
// when the client is indexed, else every object in ns: callers filter.
func (o *Observer) listCluster(ctx context.Context, list client.ObjectList, ns, cluster string) error {
	opts := []client.ListOption{client.InNamespace(ns), client.UnsafeDisableDeepCopy}
	if o.indexed() {
		opts = append(opts, client.MatchingFields{clusterField: cluster})
	}
	if err := o.Client.List(ctx, list, opts...); err != nil {
		return fmt.Errorf("list %T in %s: %w", list, ns, err)
	}
	return nil
}
