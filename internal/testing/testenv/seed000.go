package testenv

import (
	"context"
	"maps"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
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
	// node's spec.providerID (a cluster that ran without a cloud
	// controller manager has none).
	NodeLabels map[string]string
	ProviderID func(node string) string
	// PKI holds the cluster's authorities, which the <name>-ca, -etcd,
	// -proxy and -sa Secrets hold: the ones workload was started with
	// (StartKubeWith) when Cluster API's controllers are to use them. nil
	// takes one generated once per process, real certificates that the
	// workload API server does not trust.
	PKI *PKI
	// NodeAddresses, when set, gives a node's InternalIP.
	NodeAddresses func(node string) string
}

// sharedPKI is the PKI of the clusters that bring none: generating RSA keys
// for each of a thousand clusters (hack/bench) would take minutes.
var (
	sharedPKIOnce sync.Once
	sharedPKI     *PKI
)

// Orphan creates the cluster in mgmt and workload: in mgmt the cluster's
// <name>-kubeconfig (reaching workload), -ca, -etcd and -proxy Secrets and
// the -sa Secret (in BackupNamespace when set), as Cluster API keeps them;
// in workload the Nodes, Ready, and what kubeadm leaves in kube-system: the
// kubeadm-config ConfigMap, the kube-proxy DaemonSet and the CoreDNS
// Deployment.
func Orphan(t T, mgmt, workload *Kube, oc OrphanedCluster) {
	t.Helper()
	ctx := context.Background()
	for _, ns := range []string{oc.Namespace, oc.BackupNamespace} {
		if ns != "" {
			createObject(ctx, t, mgmt.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		}
	}
	orphanSecrets(ctx, t, mgmt, workload, oc)
	for _, name := range oc.ControlPlaneNodes {
		orphanNode(ctx, t, workload, oc, name, true)
	}
	for _, name := range oc.WorkerNodes {
		orphanNode(ctx, t, workload, oc, name, false)
	}
	for _, obj := range kubeadmSystem(oc.KubeletVersion, workload.Config.Host) {
		createObject(ctx, t, workload.Client, obj)
	}
}

// createObject creates obj; one that exists already is left as it is, any
// other error fails the test.
func createObject(ctx context.Context, t T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("testenv: create %T %s: %v", obj, obj.GetName(), err)
	}
}

// orphanSecrets creates in mgmt the Secrets Cluster API keeps for the
// cluster: its kubeconfig (reaching workload) and its authorities, the
// service account keys in BackupNamespace when set.
func orphanSecrets(ctx context.Context, t T, mgmt, workload *Kube, oc OrphanedCluster) {
	t.Helper()
	secret := func(ns, suffix string, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: oc.Name + "-" + suffix,
				Labels: map[string]string{"cluster.x-k8s.io/cluster-name": oc.Name}},
			Type: "cluster.x-k8s.io/secret",
			Data: data,
		}
	}
	pki := oc.PKI
	if pki == nil {
		sharedPKIOnce.Do(func() { sharedPKI = NewPKI(t, "shared") })
		pki = sharedPKI
	}
	pair := func(kp KeyPair) map[string][]byte { return map[string][]byte{"tls.crt": kp.Cert, "tls.key": kp.Key} }
	kubeconfig := oc.Kubeconfig
	if len(kubeconfig) == 0 {
		kubeconfig = workload.Kubeconfig(t)
	}
	createObject(ctx, t, mgmt.Client, secret(oc.Namespace, "kubeconfig", map[string][]byte{"value": kubeconfig}))
	createObject(ctx, t, mgmt.Client, secret(oc.Namespace, "ca", pair(pki.CA)))
	createObject(ctx, t, mgmt.Client, secret(oc.Namespace, "etcd", pair(pki.EtcdCA)))
	createObject(ctx, t, mgmt.Client, secret(oc.Namespace, "proxy", pair(pki.FrontProxyCA)))
	saNamespace := oc.Namespace
	if oc.BackupNamespace != "" {
		saNamespace = oc.BackupNamespace
	}
	createObject(ctx, t, mgmt.Client, secret(saNamespace, "sa", pair(pki.ServiceAccount)))
}

// orphanNode creates the Node name in workload, Ready, labelled (and
// tainted, for the control plane) as kubeadm leaves it.
func orphanNode(ctx context.Context, t T, workload *Kube, oc OrphanedCluster, name string, controlPlane bool) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
	}}}
	maps.Copy(n.Labels, oc.NodeLabels)
	if oc.ProviderID != nil {
		n.Spec.ProviderID = oc.ProviderID(name)
	}
	if controlPlane {
		n.Labels["node-role.kubernetes.io/control-plane"] = ""
		n.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
	}
	createObject(ctx, t, workload.Client, n)
	n.Status = corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		//nolint:staticcheck // SA1019: the Node reports what the seed's kubelets report, KubeProxyVersion included
		NodeInfo: corev1.NodeSystemInfo{KubeletVersion: oc.KubeletVersion, KubeProxyVersion: oc.KubeletVersion,
			OperatingSystem: "linux", Architecture: "amd64", ContainerRuntimeVersion: "containerd://1.7.22", OSImage: "Ubuntu 22.04.5 LTS"},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}},
	}
	if oc.NodeAddresses != nil && oc.NodeAddresses(name) != "" {
		n.Status.Addresses = append([]corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: oc.NodeAddresses(name)}}, n.Status.Addresses...)
	}
	if err := workload.Client.Status().Update(ctx, n); err != nil {
		t.Fatalf("testenv: mark node %s Ready: %v", name, err)
	}
}

// Images of the kubeadm cluster's add-ons, as kubeadm v1.31 deploys them.
const (
	ImageRepository = "registry.k8s.io"
	CoreDNSImage    = ImageRepository + "/coredns/coredns:v1.11.3"
)

// KubeProxyImage is the kube-proxy image kubeadm deploys for version.
func KubeProxyImage(version string) string { return ImageRepository + "/kube-proxy:" + version }

// kubeadmSystem is what kubeadm init leaves in kube-system that Cluster
// API's KubeadmControlPlane reads or updates: the kubeadm-config
// ConfigMap, the kube-proxy DaemonSet and the CoreDNS Deployment with its
// Corefile.
func kubeadmSystem(version, endpoint string) []client.Object {
	host := strings.TrimPrefix(endpoint, "https://")
	host = strings.TrimSuffix(host, "/")
	labels := func(app string) map[string]string { return map[string]string{"k8s-app": app} }
	pod := func(app, container, image string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels(app)},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: container, Image: image}}},
		}
	}
	return []client.Object{
		&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadm-config"},
			Data: map[string]string{"ClusterConfiguration": `apiVersion: kubeadm.k8s.io/v1beta3
kind: ClusterConfiguration
kubernetesVersion: ` + version + `
controlPlaneEndpoint: ` + host + `
imageRepository: ` + ImageRepository + `
certificatesDir: /etc/kubernetes/pki
clusterName: kubernetes
dns: {}
etcd:
  local:
    dataDir: /var/lib/etcd
networking:
  dnsDomain: cluster.local
  podSubnet: 192.168.0.0/16
  serviceSubnet: 10.96.0.0/12
apiServer:
  timeoutForControlPlane: 4m0s
controllerManager: {}
scheduler: {}
`},
		},
		&appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-proxy", Labels: labels("kube-proxy")},
			Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels("kube-proxy")}, Template: pod("kube-proxy", "kube-proxy", KubeProxyImage(version))},
		},
		&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns"},
			Data:       map[string]string{"Corefile": ".:53 {\n    errors\n    health\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n       pods insecure\n       fallthrough in-addr.arpa ip6.arpa\n    }\n    forward . /etc/resolv.conf\n    cache 30\n    loop\n    reload\n}\n"},
		},
		&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns", Labels: labels("kube-dns")},
			Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels("kube-dns")}, Template: pod("kube-dns", "coredns", CoreDNSImage)},
		},
	}
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
