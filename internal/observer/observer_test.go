package observer

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/controlplane/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/kube"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

const secretValue = "observer-test-secret-value"

func plan(provider string) *v1alpha1.MigrationPlan {
	p := &v1alpha1.MigrationPlan{Spec: v1alpha1.Spec{
		Cluster:  v1alpha1.ClusterRef{Name: "c1", Namespace: "default"},
		Strategy: v1alpha1.StrategyAdopt,
		Target: v1alpha1.Target{
			Identity:     v1alpha1.Identity{From: &v1alpha1.SecretSource{Namespace: "creds", Name: "os"}},
			ControlPlane: v1alpha1.ControlPlane{Provider: provider},
		},
		Manifests: &v1alpha1.Manifests{CloudControllerManager: &v1alpha1.CloudControllerManager{Path: "ccm.yaml"}},
	}}
	v1alpha1.Default(p)
	return p
}

// TestObserve reads a cluster from a real API server, which also serves as
// its own workload cluster through the c1-kubeconfig Secret.
func TestObserve(t *testing.T) {
	k := testenv.StartKube(t)
	ctx := context.Background()
	create := func(obj client.Object) {
		t.Helper()
		if err := k.Client.Create(ctx, obj); err != nil {
			t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
		}
	}
	meta := func(name string, annotations map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: annotations}
	}
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "creds"}})
	create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "creds", Name: "os"}, Data: map[string][]byte{"clouds.yaml": []byte(secretValue)}})
	create(&corev1.Secret{ObjectMeta: meta("c1-kubeconfig", nil), Data: map[string][]byte{"value": k.Kubeconfig(t)}})
	create(&clusterv1.Cluster{
		ObjectMeta: meta("c1", map[string]string{observed.AnnotationPausedBy: "ferry"}),
		Spec: clusterv1.ClusterSpec{Paused: true,
			InfrastructureRef:    &corev1.ObjectReference{Kind: "DockerCluster", Name: "c1"},
			ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "10.0.0.10", Port: 6443}},
	})
	// Paused by the user: no ferry annotation.
	create(&controlplanev1.KubeadmControlPlane{
		ObjectMeta: meta("c1-control-plane", map[string]string{clusterv1.PausedAnnotation: ""}),
		Spec: controlplanev1.KubeadmControlPlaneSpec{Replicas: ptr.To[int32](3), Version: "v1.31.4",
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{
				InfrastructureRef: corev1.ObjectReference{Kind: "OpenStackMachineTemplate", Name: "c1-control-plane"}}},
	})
	machine := func(name, cluster string, labels map[string]string) *clusterv1.Machine {
		return &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels},
			Spec: clusterv1.MachineSpec{ClusterName: cluster, ProviderID: ptr.To(step.ProviderIDPrefix + name),
				InfrastructureRef: corev1.ObjectReference{Kind: "OpenStackMachine", Name: name}},
		}
	}
	create(machine("c1-cp-0", "c1", map[string]string{clusterv1.MachineControlPlaneLabel: ""}))
	create(machine("other-cp-0", "other", nil))
	create(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "c1-md-0-a", Labels: map[string]string{"role": "worker"}},
		Spec: corev1.NodeSpec{Unschedulable: true}})
	pod := func(name string, owner []metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, OwnerReferences: owner},
			Spec:       corev1.PodSpec{NodeName: "c1-md-0-a", Containers: []corev1.Container{{Name: "app", Image: "app"}}},
		}
	}
	create(pod("web", nil))
	create(pod("ds-agent", []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "1234"}}))

	// The second object has no namespace: applied, it lands in "default".
	manifests := fstest.MapFS{"ccm.yaml": {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ccm\n  namespace: kube-system\n---\n" +
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ccm-config\n")}}
	o := &Observer{Client: k.Client, Manifests: manifests}
	// cached reuses its workload observations until told a step ran.
	cached := &Observer{Client: k.Client, Manifests: manifests, WorkloadMaxAge: time.Hour}
	if _, err := cached.Observe(ctx, plan(v1alpha1.ProviderKubeadm), observed.Record{}); err != nil {
		t.Fatal(err)
	}
	s, err := o.Observe(ctx, plan(v1alpha1.ProviderKubeadm), observed.Record{Approved: "cluster"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Cluster == nil || !s.Cluster.Paused || !s.Cluster.ByFerry || s.Cluster.InfrastructureRef.Kind != "DockerCluster" || s.Cluster.ControlPlaneEndpoint != "10.0.0.10:6443" {
		t.Errorf("cluster = %+v", s.Cluster)
	}
	if cp := s.ControlPlane; cp == nil || !cp.Paused || cp.ByFerry || cp.Replicas != 3 || cp.InfrastructureRef.Name != "c1-control-plane" {
		t.Errorf("control plane = %+v; want paused by the user, 3 replicas", cp)
	}
	if len(s.Machines) != 1 || s.Machines[0].Name != "c1-cp-0" || !s.Machines[0].ControlPlane || s.Machines[0].ProviderID != "openstack:///c1-cp-0" {
		t.Errorf("machines = %+v; want only c1's control-plane machine", s.Machines)
	}
	if !s.HasSecretKey("creds", "os", "clouds.yaml") || s.Secret("default", "c1-kubeconfig") == nil {
		t.Errorf("secrets = %+v", s.Secrets)
	}
	if s.Workload == nil {
		t.Fatalf("workload not observed: %s", s.WorkloadError)
	}
	if n := s.Node("c1-md-0-a"); n == nil || n.ControlPlane || !n.Unschedulable || n.PodsToEvict != 0 || n.Labels["role"] != "worker" {
		t.Errorf("node = %+v; want a cordoned worker whose pods an adopt plan does not count", n)
	}
	replace := plan(v1alpha1.ProviderKubeadm)
	replace.Spec.Strategy = v1alpha1.StrategyReplace
	if rs, err := o.Observe(ctx, replace, observed.Record{}); err != nil {
		t.Fatal(err)
	} else if n := rs.Node("c1-md-0-a"); n == nil || n.PodsToEvict != 1 {
		t.Errorf("node = %+v (workload error %q); want 1 pod to evict for a replace plan (the DaemonSet's does not count)", n, rs.WorkloadError)
	}
	if s.Manifest("ccm.yaml").Applied {
		t.Errorf("manifest applied before its ConfigMap exists")
	}
	if s.Record.Approved != "cluster" || s.CloudError == "" {
		t.Errorf("record %+v, cloud error %q", s.Record, s.CloudError)
	}
	if data, _ := json.Marshal(s); strings.Contains(string(data), secretValue) || strings.Contains(string(data), "certificate-authority-data") {
		t.Errorf("snapshot holds a secret value: %s", data)
	}

	create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "ccm"}})
	s, err = o.Observe(ctx, plan(v1alpha1.ProviderKubeadm), observed.Record{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Manifest("ccm.yaml").Applied || s.Workload == nil {
		t.Errorf("manifest applied with one of its objects missing (workload error %q)", s.WorkloadError)
	}
	create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ccm-config"}})
	s, err = o.Observe(ctx, plan(v1alpha1.ProviderKubeadm), observed.Record{})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Manifest("ccm.yaml").Applied {
		t.Errorf("manifest not applied after its ConfigMap was created")
	}
	if s, _ := cached.Observe(ctx, plan(v1alpha1.ProviderKubeadm), observed.Record{}); s.Manifest("ccm.yaml").Applied {
		t.Errorf("a cached workload observation was read again before its age or a step's result")
	}
	cached.Forget("", step.Kube)
	if s, _ := cached.Observe(ctx, plan(v1alpha1.ProviderKubeadm), observed.Record{}); !s.Manifest("ccm.yaml").Applied {
		t.Errorf("after Forget the workload cluster was not read again")
	}

	// A KamajiControlPlane is read as unstructured data.
	kcp := &unstructured.Unstructured{}
	kcp.SetGroupVersionKind(kube.KamajiGVK)
	kcp.SetNamespace("default")
	kcp.SetName("c1-control-plane")
	_ = unstructured.SetNestedField(kcp.Object, int64(2), "spec", "replicas")
	_ = unstructured.SetNestedField(kcp.Object, "v1.28.10", "spec", "version")
	_ = unstructured.SetNestedField(kcp.Object, "default", "spec", "dataStoreName")
	_ = unstructured.SetNestedStringSlice(kcp.Object, []string{"InternalIP", "Hostname"}, "spec", "kubelet", "preferredAddressTypes")
	create(kcp)
	s, err = o.Observe(ctx, plan(v1alpha1.ProviderKamaji), observed.Record{})
	if err != nil {
		t.Fatal(err)
	}
	if cp := s.ControlPlane; cp == nil || cp.Kind != v1alpha1.ProviderKamaji || cp.Replicas != 2 || !slices.Equal(cp.PreferredAddressTypes, []string{"InternalIP", "Hostname"}) {
		t.Errorf("Kamaji control plane = %+v", cp)
	}

	// Without the kubeconfig Secret the workload cluster is unreachable,
	// which the snapshot records rather than failing.
	if err := k.Client.Delete(ctx, &corev1.Secret{ObjectMeta: meta("c1-kubeconfig", nil)}); err != nil {
		t.Fatal(err)
	}
	s, err = o.Observe(ctx, plan(v1alpha1.ProviderKubeadm), observed.Record{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Workload != nil || !strings.Contains(s.WorkloadError, "c1-kubeconfig") {
		t.Errorf("workload = %+v, error %q; want unreachable, naming the Secret", s.Workload, s.WorkloadError)
	}
}
