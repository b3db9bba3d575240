package observer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	infrav1alpha1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1alpha1"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/bootstrap/kubeadm/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/controlplane/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/kube"
	"github.com/ferry-dev/ferry/internal/observed"
)

// cachedKinds are the management cluster's kinds the observer reads from
// shared informers: one watch per kind for the whole fleet, instead of
// reads per plan per cycle. Secrets come from informers too, one per
// namespace that plans name (ferry may read Secrets only there), started
// when first read.
var cachedKinds = []client.Object{
	&clusterv1.Cluster{}, &clusterv1.Machine{}, &clusterv1.MachineSet{}, &clusterv1.MachineDeployment{},
	&controlplanev1.KubeadmControlPlane{}, &bootstrapv1.KubeadmConfig{}, &bootstrapv1.KubeadmConfigTemplate{},
	&infrav1.OpenStackCluster{}, &infrav1.OpenStackMachine{}, &infrav1.OpenStackMachineTemplate{},
	&infrav1alpha1.OpenStackServer{},
}

// clusterField indexes the cached kinds by the cluster an object belongs
// to (ClusterOf), so that a plan lists its own cluster's objects, not its
// whole namespace's.
const clusterField = "ferry.dev/cluster"

// ClusterOf is the cluster a management cluster object belongs to: the
// name of a Cluster, spec.clusterName of a Machine, MachineSet or
// MachineDeployment, CAPI's cluster-name label of anything else, or for a
// Secret without the label the <cluster> of <cluster>-<suffix> for the
// suffixes ferry reads. "" when it cannot tell.
func ClusterOf(obj client.Object) string {
	switch o := obj.(type) {
	case *clusterv1.Cluster:
		return o.Name
	case *clusterv1.Machine:
		return o.Spec.ClusterName
	case *clusterv1.MachineSet:
		return o.Spec.ClusterName
	case *clusterv1.MachineDeployment:
		return o.Spec.ClusterName
	}
	if c := obj.GetLabels()[clusterv1.ClusterNameLabel]; c != "" {
		return c
	}
	switch obj.(type) {
	case *infrav1.OpenStackCluster:
		return obj.GetName()
	case *corev1.Secret:
		for _, suffix := range clusterSecretSuffixes {
			if c, ok := strings.CutSuffix(obj.GetName(), "-"+suffix); ok {
				return c
			}
		}
	}
	return ""
}

// clusterSecretSuffixes are the suffixes of the Secrets <cluster>-<suffix>
// ClusterOf recognises. (Built once: informers call ClusterOf from many
// goroutines, and an append to a shared slice would write into its
// spare capacity from all of them.)
var clusterSecretSuffixes = append(slices.Clone(observed.SecretSuffixes), "cloud-config")

// indexedClient is the client NewCachedClient returns: its lists accept
// client.MatchingFields{clusterField: name}.
type indexedClient struct{ client.Client }

func (indexedClient) clusterIndexed() {}

// NewCachedClient returns a client of the management cluster whose reads
// of the CAPI and CAPO kinds come from informers (synced before it
// returns), indexed by cluster, and whose other reads and all writes go to
// the API server. changed is called with the namespace and cluster
// (ClusterOf, "" when unknown) of every change the informers see, so that
// a level-triggered loop can plan again; it must not block. The informers
// stop when ctx ends.
func NewCachedClient(ctx context.Context, cfg *rest.Config, changed func(namespace, cluster string)) (client.Client, error) {
	scheme := kube.Scheme()
	c, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultTransform: trim})
	if err != nil {
		return nil, fmt.Errorf("informers: %w", err)
	}
	notify := func(obj any) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if o, ok := obj.(client.Object); ok {
			changed(o.GetNamespace(), ClusterOf(o))
		}
	}
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
		DeleteFunc: notify,
	}
	for _, obj := range cachedKinds {
		if err := c.IndexField(ctx, obj, clusterField, func(o client.Object) []string { return []string{ClusterOf(o)} }); err != nil {
			return nil, fmt.Errorf("index %T by cluster: %w", obj, err)
		}
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("informer for %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return nil, fmt.Errorf("informer for %T: %w", obj, err)
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("informers did not sync: %w", context.Cause(ctx))
	}
	r := &cachedReader{Reader: c, ctx: ctx, cfg: cfg, scheme: scheme, handler: handler, secrets: map[string]cache.Cache{}, stops: map[string]context.CancelFunc{}}
	cl, err := client.New(cfg, client.Options{Scheme: scheme, Cache: &client.CacheOptions{
		Reader:     r,
		DisableFor: []client.Object{&corev1.ConfigMap{}},
	}})
	if err != nil {
		return nil, err
	}
	return indexedClient{cl}, nil
}

// cachedReader reads Secrets from per-namespace informers and everything
// else from the shared cache.
type cachedReader struct {
	client.Reader
	ctx     context.Context
	cfg     *rest.Config
	scheme  *runtime.Scheme
	handler toolscache.ResourceEventHandler

	mu      sync.Mutex
	secrets map[string]cache.Cache
	stops   map[string]context.CancelFunc // each stops its namespace's informer
}

func (r *cachedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Secret); ok {
		c, err := r.secretCache(ctx, key.Namespace)
		if err != nil {
			return err
		}
		return c.Get(ctx, key, obj, opts...)
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

func (r *cachedReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*corev1.SecretList); ok {
		o := &client.ListOptions{}
		o.ApplyOptions(opts)
		if o.Namespace == "" {
			return fmt.Errorf("list Secrets: ferry lists Secrets in one namespace at a time")
		}
		c, err := r.secretCache(ctx, o.Namespace)
		if err != nil {
			return err
		}
		return c.List(ctx, list, opts...)
	}
	return r.Reader.List(ctx, list, opts...)
}

// secretCache returns the informer cache of the Secrets in namespace,
// starting it on first use. Secret values are dropped as they arrive,
// except kubeconfigs (the workload clusters are reached with them): the
// observer needs key names only.
func (r *cachedReader) secretCache(ctx context.Context, namespace string) (cache.Cache, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.secrets[namespace]; ok {
		return c, nil
	}
	c, err := cache.New(r.cfg, cache.Options{
		Scheme:            r.scheme,
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		DefaultTransform:  keysOnly,
	})
	if err != nil {
		return nil, fmt.Errorf("Secrets informer for %s: %w", namespace, err)
	}
	inf, err := c.GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		return nil, fmt.Errorf("Secrets informer for %s: %w", namespace, err)
	}
	if _, err := inf.AddEventHandler(r.handler); err != nil {
		return nil, err
	}
	run, stop := context.WithCancel(r.ctx)
	go func() { _ = c.Start(run) }()
	syncCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !c.WaitForCacheSync(syncCtx) {
		stop()
		return nil, fmt.Errorf("list Secrets in namespace %s: the informer did not sync in 30s (may ferry list and watch Secrets there? see deploy/plan-namespace)", namespace)
	}
	r.secrets[namespace], r.stops[namespace] = c, stop
	return c, nil
}

// trim drops from a cached object what is most of its size and what
// ferry never reads: managedFields and kubectl's last applied
// configuration.
func trim(obj any) (any, error) {
	if o, ok := obj.(client.Object); ok {
		o.SetManagedFields(nil)
		if a := o.GetAnnotations(); a != nil {
			delete(a, corev1.LastAppliedConfigAnnotation)
		}
	}
	return obj, nil
}

// keysOnly trims a Secret and empties its values unless it is a
// kubeconfig.
func keysOnly(obj any) (any, error) {
	obj, _ = trim(obj)
	sec, ok := obj.(*corev1.Secret)
	if !ok || strings.HasSuffix(sec.Name, "-kubeconfig") {
		return sec, nil
	}
	for k := range sec.Data {
		sec.Data[k] = nil
	}
	sec.StringData = nil
	return sec, nil
}
