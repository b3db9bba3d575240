package workload

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/executor"
	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/kube"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/step"
)

// Annotations the workload executor puts on every object it applies, so
// that a person looking at the workload cluster can tell which plan, at
// which reviewed commit, put it there.
const (
	// AnnotationPlan names the MigrationPlan that applied the object.
	AnnotationPlan = "ferry.dev/plan"
	// AnnotationRevision is the plans repository's revision the object was
	// applied from.
	AnnotationRevision = "ferry.dev/revision"
)

// defaultProbeTimeout bounds a probe: the planner gives probes no timeout
// parameter, and an application that takes longer than this to answer a
// health check is not answering.
const defaultProbeTimeout = 10 * time.Second

// Executor carries out the steps of kind step.Workload: it changes the
// migrated cluster itself, reached through the <cluster>-kubeconfig Secret
// in the management cluster. Actions: apply and wait on manifests from the
// plans repository, wait for a LoadBalancer Service's address, cordon,
// drain and delete Nodes, and probe a URL between drains.
//
// Every action is idempotent: a cordoned node is cordoned, a drained node
// has nothing left to evict, an applied manifest is applied again with the
// same result, a Node already gone is deleted.
type Executor struct {
	// Client reads the management cluster, where the kubeconfig Secret is.
	Client client.Client
	// Workload builds the workload cluster's controller-runtime client;
	// nil uses kube.WorkloadClient.
	Workload kube.ClientFunc
	// Clientset builds the workload cluster's client-go clientset from the
	// same kubeconfig; nil uses kube.WorkloadClientset.
	Clientset kube.ClientsetFunc
	// Repo returns the plans repository at a revision; manifest paths are
	// relative to its root. Required for apply and wait on manifests.
	Repo func(ctx context.Context, revision string) (fs.FS, error)
	// HTTPClient sends probes; nil uses a client with no timeout of its own
	// (each probe sets one).
	HTTPClient HTTPDoer
}

var _ executor.Executor = (*Executor)(nil)

// Kind is step.Workload.
func (e *Executor) Kind() step.Kind { return step.Workload }

// job is one step being carried out, with what every action needs.
type job struct {
	ev  *events.StepEvent
	log *slog.Logger
}

// params are the step's parameters; their getters are the only parsers.
func (s *job) params() step.Params { return s.ev.Step.Params }

// timeout reads the step's timeout parameter, falling back to def. A
// timeout that does not parse is a defect of the plan or the planner that
// no retry fixes (the error is terminal).
func (s *job) timeout(def time.Duration) (time.Duration, error) {
	return s.params().Duration(step.ParamTimeout, def)
}

// Execute carries out one workload step.
func (e *Executor) Execute(ctx context.Context, ev *events.StepEvent) (events.Report, error) {
	cluster := ev.Inputs.Cluster
	if cluster.Name == "" || cluster.Namespace == "" {
		return events.Report{}, failure.Terminal(fmt.Errorf("step %s carries no cluster in its inputs", ev.Step.Key))
	}
	s := &job{ev: ev, log: logging.From(ctx)}

	a, kind := ev.Step.Action, ev.Step.Target.Kind
	switch {
	case a == step.Probe:
		// A probe talks to the application, not to the cluster: no
		// kubeconfig needed.
		return e.probe(ctx, s)
	case (a == step.Apply || a == step.Delete) && kind == step.Manifest:
		c, err := e.connect(ctx, cluster)
		if err != nil {
			return events.Report{}, err
		}
		if a == step.Delete {
			return e.deleteManifest(ctx, s, c)
		}
		return e.apply(ctx, s, c)
	}
	if run := e.clientsetAction(a, kind); run != nil {
		cs, err := e.connectClientset(ctx, cluster)
		if err != nil {
			return events.Report{}, err
		}
		return run(ctx, s, cs)
	}
	return events.Report{}, failure.Terminal(fmt.Errorf("workload executor: no action %q on %s", a, kind))
}

// clientsetAction carries out a step with the workload cluster's
// clientset: watches and the drain helper need client-go's.
type clientsetAction func(ctx context.Context, s *job, cs kubernetes.Interface) (events.Report, error)

// clientsetAction returns the function for an action on a kind, or nil
// when it is not one of the clientset's.
func (e *Executor) clientsetAction(a step.Action, kind string) clientsetAction {
	switch {
	case a == step.Wait && kind == step.Manifest:
		return e.waitManifest
	case a == step.Wait && kind == step.Service:
		return waitService
	case kind != step.Node:
		return nil
	case a == step.SetProviderID:
		return setProviderID
	case a == step.Cordon:
		return cordonNode
	case a == step.Uncordon:
		return uncordonNode
	case a == step.Release:
		return releaseNode
	case a == step.Drain:
		return drainNode
	case a == step.Delete:
		return deleteNode
	}
	return nil
}

// connect builds a controller-runtime client of the workload cluster of
// the step's Cluster.
func (e *Executor) connect(ctx context.Context, cluster v1alpha1.ClusterRef) (client.Client, error) {
	build := e.Workload
	if build == nil {
		build = kube.WorkloadClient
	}
	return kube.ConnectWorkload(ctx, e.Client, cluster.Namespace, cluster.Name, build)
}

// connectClientset builds a client-go clientset of the workload cluster
// of the step's Cluster.
func (e *Executor) connectClientset(ctx context.Context, cluster v1alpha1.ClusterRef) (kubernetes.Interface, error) {
	build := e.Clientset
	if build == nil {
		build = kube.WorkloadClientset
	}
	return kube.ConnectWorkload(ctx, e.Client, cluster.Namespace, cluster.Name, build)
}
