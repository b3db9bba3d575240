package observer

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/kube"
	"github.com/ferry-dev/ferry/internal/observed"
)

// Node labels that mark a control-plane node, current and legacy.
var controlPlaneLabels = []string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"}

// workload reads the workload cluster through the kubeconfig in the
// <cluster>-kubeconfig Secret. Failing to reach it is recorded, not returned.
func (o *Observer) workload(ctx context.Context, p *v1alpha1.MigrationPlan, s *observed.Snapshot) {
	if o.WorkloadMaxAge > 0 {
		o.mu.Lock()
		c, ok := o.workloads[p.Metadata.Name]
		o.mu.Unlock()
		if ok && time.Since(c.at) < o.WorkloadMaxAge {
			s.Workload = c.w
			return
		}
	}
	began := time.Now()
	build := o.Workload
	if build == nil {
		build = kube.WorkloadClient
	}
	c, err := kube.ConnectWorkload(ctx, o.Client, p.Spec.Cluster.Namespace, p.Spec.Cluster.Name, build)
	if err != nil {
		s.WorkloadError = err.Error()
		return
	}
	w, err := readWorkload(ctx, c, p, o.repo(ctx))
	if err != nil {
		s.WorkloadError = err.Error()
		return
	}
	s.Workload = w
	if o.WorkloadMaxAge > 0 {
		o.mu.Lock()
		if o.workloads == nil {
			o.workloads = map[string]cachedWorkload{}
		}
		// From when the read began: a change during it may be missing.
		o.workloads[p.Metadata.Name] = cachedWorkload{w: w, at: began}
		o.mu.Unlock()
	}
}

func readWorkload(ctx context.Context, c client.Client, p *v1alpha1.MigrationPlan, repo fs.FS) (*observed.Workload, error) {
	w := &observed.Workload{}
	if err := readNodes(ctx, c, p, w); err != nil {
		return nil, err
	}
	if err := readKubeadmConfig(ctx, c, w); err != nil {
		return nil, err
	}
	if lb := cutoverService(p); lb != nil {
		var svc corev1.Service
		err := c.Get(ctx, client.ObjectKey{Namespace: lb.Namespace, Name: lb.Name}, &svc)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get Service %s/%s: %w", lb.Namespace, lb.Name, err)
		}
		w.LoadBalancers = map[string]string{lb.Namespace + "/" + lb.Name: kube.ExternalAddress(&svc)}
	}
	if repo != nil {
		w.Manifests = map[string]observed.Manifest{}
		for _, path := range manifestPaths(p) {
			m, err := manifestState(ctx, c, repo, p.Metadata.Name, path)
			if err != nil {
				return nil, err
			}
			w.Manifests[path] = m
		}
	}
	return w, nil
}

// readNodes reads the workload cluster's nodes, with the pods a drain has
// left to evict on those a replace plan cordoned.
func readNodes(ctx context.Context, c client.Client, p *v1alpha1.MigrationPlan, w *observed.Workload) error {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	for _, n := range nodes.Items {
		on := observed.Node{
			Name:            n.Name,
			Labels:          n.Labels,
			Unschedulable:   n.Spec.Unschedulable,
			CordonedByFerry: n.Annotations[observed.AnnotationCordonedBy] == p.Metadata.Name,
			ProviderID:      n.Spec.ProviderID,
			KubeletVersion:  n.Status.NodeInfo.KubeletVersion,
			Machine:         n.Annotations[clusterv1.MachineAnnotation],
		}
		// Only a plan that drains counts pods, and only on the nodes it
		// cordoned: a workload cluster's pods are many.
		if p.Spec.Strategy == v1alpha1.StrategyReplace && n.Spec.Unschedulable {
			var pods corev1.PodList
			if err := c.List(ctx, &pods, client.MatchingFields{"spec.nodeName": n.Name}); err != nil {
				return fmt.Errorf("list pods on node %s: %w", n.Name, err)
			}
			for i := range pods.Items {
				if evictable(&pods.Items[i]) {
					on.PodsToEvict++
				}
			}
		}
		for _, l := range controlPlaneLabels {
			if _, ok := n.Labels[l]; ok {
				on.ControlPlane = true
			}
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				on.Ready = cond.Status == corev1.ConditionTrue
			}
		}
		w.Nodes = append(w.Nodes, on)
	}
	return nil
}

// readKubeadmConfig reads whether kubeadm's ConfigMap exists, and the
// version and etcd kind it names.
func readKubeadmConfig(ctx context.Context, c client.Client, w *observed.Workload) error {
	var cm corev1.ConfigMap
	err := c.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kubeadm-config"}, &cm)
	switch {
	case err == nil:
		w.KubeadmConfig = true
		var cc struct {
			KubernetesVersion string `json:"kubernetesVersion"`
			Etcd              struct {
				External *struct{} `json:"external"`
			} `json:"etcd"`
		}
		// A ClusterConfiguration that does not parse is the kube
		// executor's to report, with the line; here it only has no version.
		if yaml.Unmarshal([]byte(cm.Data["ClusterConfiguration"]), &cc) == nil {
			w.KubernetesVersion = cc.KubernetesVersion
			w.ExternalEtcd = cc.Etcd.External != nil
		}
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("get kube-system/kubeadm-config: %w", err)
	}
	return nil
}

// evictable reports whether a drain would evict the pod: not a mirror pod,
// not a DaemonSet's, not finished.
func evictable(pod *corev1.Pod) bool {
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	for _, o := range pod.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return false
		}
	}
	return true
}

func cutoverService(p *v1alpha1.MigrationPlan) *v1alpha1.ObjectRef {
	if p.Spec.Cutover == nil {
		return nil
	}
	return p.Spec.Cutover.LoadBalancerService
}

func manifestPaths(p *v1alpha1.MigrationPlan) []string {
	m := p.Spec.Manifests
	if m == nil {
		return nil
	}
	var out []string
	if m.CloudControllerManager != nil {
		out = append(out, m.CloudControllerManager.Path)
	}
	return append(out, m.VPNOverlay...)
}

// manifestState reports a manifest applied when every object in it exists,
// and healthy when its DaemonSets and Deployments are available.
func manifestState(ctx context.Context, c client.Client, repo fs.FS, plan, path string) (observed.Manifest, error) {
	data, err := fs.ReadFile(repo, path)
	if err != nil {
		return observed.Manifest{}, fmt.Errorf("read manifest %s: %w", path, err)
	}
	objs, err := decodedManifests.decode(data)
	if err != nil {
		return observed.Manifest{}, fmt.Errorf("manifest %s: %w", path, err)
	}
	state := observed.Manifest{Applied: true, Healthy: true}
	for _, want := range objs {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(want.GroupVersionKind())
		// A namespaced object without a namespace goes to "default" when
		// applied, as kubectl does; look for it there. (want is shared:
		// it is not changed.)
		key := client.ObjectKeyFromObject(want)
		if key.Namespace == "" {
			if namespaced, err := c.IsObjectNamespaced(want); err == nil && namespaced {
				key.Namespace = "default"
			}
		}
		err := c.Get(ctx, key, got)
		if apierrors.IsNotFound(err) {
			// Not applied; read on: a rollback asks whether any object
			// ferry created is left.
			state.Applied, state.Healthy = false, false
			continue
		}
		if err != nil {
			return observed.Manifest{}, fmt.Errorf("manifest %s: get %s %s: %w", path, want.GetKind(), want.GetName(), err)
		}
		if !available(got) {
			state.Healthy = false
		}
		if got.GetAnnotations()[observed.LabelCreatedBy] == plan {
			state.Created = true
		}
	}
	return state, nil
}

// decodedManifests keeps decoded manifests by content: every plan of a
// fleet observes the same few files at every cycle.
var decodedManifests manifestCache

// manifestCache remembers the objects of the last manifests decoded, by
// their content's hash; its objects are shared and must not be changed.
type manifestCache struct {
	mu   sync.Mutex
	objs map[[sha256.Size]byte][]*unstructured.Unstructured
}

// maxCachedManifests bounds the cache; past it, it starts again empty.
const maxCachedManifests = 64

func (m *manifestCache) decode(data []byte) ([]*unstructured.Unstructured, error) {
	sum := sha256.Sum256(data)
	m.mu.Lock()
	objs, ok := m.objs[sum]
	m.mu.Unlock()
	if ok {
		return objs, nil
	}
	objs, err := kube.DecodeManifest(data)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.objs == nil || len(m.objs) >= maxCachedManifests {
		m.objs = map[[sha256.Size]byte][]*unstructured.Unstructured{}
	}
	m.objs[sum] = objs
	return objs, nil
}

func available(u *unstructured.Unstructured) bool {
	switch u.GetKind() {
	case "DaemonSet":
		var ds appsv1.DaemonSet
		if err := runtimeConvert(u, &ds); err != nil {
			return false
		}
		return ds.Status.DesiredNumberScheduled == ds.Status.NumberAvailable && ds.Status.ObservedGeneration >= ds.Generation
	case "Deployment":
		var d appsv1.Deployment
		if err := runtimeConvert(u, &d); err != nil {
			return false
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		return d.Status.AvailableReplicas >= want && d.Status.ObservedGeneration >= d.Generation
	}
	return true
}

func runtimeConvert(u *unstructured.Unstructured, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into)
}
