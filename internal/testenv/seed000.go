package testenv

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OrphanedCluster describes a running kubeadm cluster that CAPI no longer
// manages, as seed 000's scripts find it before adoption.
type OrphanedCluster struct {
	// Name and Namespace of the cluster in the management cluster.
	Name, Namespace string
	// BackupNamespace holds the copy of the <name>-sa Secret, missing in
	// Namespace; empty puts every Secret in Namespace.
	BackupNamespace string
	// ControlPlaneNodes and WorkerNodes are the node names; nodes are Ready
	// with kubelet KubeletVersion.
	ControlPlaneNodes, WorkerNodes []string
	KubeletVersion                 string
	// Kubeconfig is what the <name>-kubeconfig Secret holds; empty holds
	// workload's admin kubeconfig.
	Kubeconfig []byte
	// NodeLabels are added to every Node; ProviderID, when set, gives a
	// node's spec.providerID.
	NodeLabels map[string]string
	ProviderID func(node string) string
}

// Orphan creates the cluster in mgmt and workload: in mgmt the cluster's
// <name>-kubeconfig (reaching workload), -ca and -etcd Secrets and the -sa
// Secret (in BackupNamespace when set); in workload the Nodes, Ready, and
// the kubeadm-config ConfigMap. Secret contents are placeholders: nothing
// in these tests signs with them.
func Orphan(t T, mgmt, workload *Kube, oc OrphanedCluster) {
	t.Helper()
	ctx := context.Background()
	create := func(c client.Client, obj client.Object) {
		t.Helper()
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("testenv: create %T %s: %v", obj, obj.GetName(), err)
		}
	}
	for _, ns := range []string{oc.Namespace, oc.BackupNamespace} {
		if ns != "" {
			create(mgmt.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		}
	}
	secret := func(ns, suffix string, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: oc.Name + "-" + suffix,
				Labels: map[string]string{"cluster.x-k8s.io/cluster-name": oc.Name}},
			Data: data,
		}
	}
	pair := map[string][]byte{"tls.crt": []byte("placeholder certificate"), "tls.key": []byte("placeholder key")}
	kubeconfig := oc.Kubeconfig
	if len(kubeconfig) == 0 {
		kubeconfig = workload.Kubeconfig(t)
	}
	create(mgmt.Client, secret(oc.Namespace, "kubeconfig", map[string][]byte{"value": kubeconfig}))
	create(mgmt.Client, secret(oc.Namespace, "ca", pair))
	create(mgmt.Client, secret(oc.Namespace, "etcd", pair))
	saNamespace := oc.Namespace
	if oc.BackupNamespace != "" {
		saNamespace = oc.BackupNamespace
	}
	create(mgmt.Client, secret(saNamespace, "sa", pair))

	node := func(name string, controlPlane bool) {
		t.Helper()
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
		maps.Copy(n.Labels, oc.NodeLabels)
		if oc.ProviderID != nil {
			n.Spec.ProviderID = oc.ProviderID(name)
		}
		if controlPlane {
			n.Labels["node-role.kubernetes.io/control-plane"] = ""
		}
		create(workload.Client, n)
		n.Status = corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: oc.KubeletVersion},
		}
		if err := workload.Client.Status().Update(ctx, n); err != nil {
			t.Fatalf("testenv: mark node %s Ready: %v", name, err)
		}
	}
	for _, name := range oc.ControlPlaneNodes {
		node(name, true)
	}
	for _, name := range oc.WorkerNodes {
		node(name, false)
	}
	create(workload.Client, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadm-config"},
		Data:       map[string]string{"ClusterConfiguration": "apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\nkubernetesVersion: " + oc.KubeletVersion + "\n"},
	})
}

// CCMManifest stands for the OpenStack cloud controller manager manifest
// a plan applies (spec.manifests.cloudControllerManager).
const CCMManifest = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: openstack-cloud-controller-manager
  namespace: kube-system
spec:
  selector:
    matchLabels: {k8s-app: openstack-cloud-controller-manager}
  template:
    metadata:
      labels: {k8s-app: openstack-cloud-controller-manager}
    spec:
      nodeSelector: {node-role.kubernetes.io/control-plane: ""}
      containers:
        - name: openstack-cloud-controller-manager
          image: registry.k8s.io/provider-os/openstack-cloud-controller-manager:v1.31.0
`
