// A seed 004 cluster: its control plane hosted by Kamaji in the
// management cluster, its workers on servers of the local OpenStack.

package ostest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"

	"github.com/ferry-dev/ferry/internal/kube"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// WorkerSuffixes name the servers of a cluster whose control plane is
// hosted: workers only.
var WorkerSuffixes = []string{"md-0-a", "md-0-b"}

// KamajiVersion is the version the hosted control plane runs, written as
// Kamaji writes it (no "v"); the workers' kubelets run v<KamajiVersion>.
const KamajiVersion = "1.31.4"

// Hosted is a seed 004 cluster ready to be moved onto the local OpenStack:
// in the management API server a Cluster (infrastructure DockerCluster, as
// the quickstart built it) whose control plane is a KamajiControlPlane,
// ready and initialized, with the Secrets the Kamaji provider writes for
// Cluster API (<name>-ca, <name>-kubeconfig) and the identity Secret; the
// workload API server stands for the hosted API server (its address is the
// Cluster's controlPlaneEndpoint), with Nodes named like the fixture's
// worker servers. There are no control-plane servers or nodes.
//
// What a Kamaji controller keeps doing afterwards is the part of
// testenv.StartKamajiStandIn, which the test runs.
type Hosted struct {
	// Adoptable holds the cloud, the two API servers and the node names
	// (ControlPlane is empty); Endpoint is the hosted API server's host.
	*Adoptable
	// ControlPlaneName is the KamajiControlPlane's name.
	ControlPlaneName string
	// ControlPlaneEndpoint is the Cluster's endpoint: the hosted API server.
	ControlPlaneEndpoint clusterv1.APIEndpoint
}

// NewHosted builds a Hosted cluster named name; everything goes when t
// ends.
func NewHosted(t testenv.T, name string) *Hosted {
	t.Helper()
	return NewHostedOn(t, name, nil)
}

// NewHostedOn is NewHosted whose workers are real kubelets on a network
// of host's, registered without a provider ID, and whose hosted API
// server listens on that network's host address, which they reach as a
// tenant's nodes reach Kamaji's service (NewAdoptableOn's nodes, without
// control-plane nodes). host nil is NewHosted: the fixture writes the
// Nodes (testenv.Orphan, a stand-in).
func NewHostedOn(t testenv.T, name string, host *testenv.Host) *Hosted {
	t.Helper()
	h := &Hosted{Adoptable: newNodes(t, name, WorkerSuffixes), ControlPlaneName: name + "-control-plane"}
	a := h.Adoptable
	a.Mgmt = testenv.StartKube(t)
	opts := testenv.KubeOptions{PKI: a.PKI}
	a.serverNet(host, &opts)
	if a.ServerNet != nil {
		opts.Address = a.ServerNet.HostIP
	}
	a.Workload = testenv.StartKubeWith(t, opts)
	h.ControlPlaneEndpoint = apiEndpoint(t, a.Workload.Config.Host)
	a.Endpoint = h.ControlPlaneEndpoint.Host
	a.orphanOn(t, host)
	h.kamajiSecretsOnly(t)
	a.identitySecret(t)
	h.kamajiControlPlane(t)
	h.cluster(t)
	return h
}

// apiEndpoint is host (a URL) as a Cluster's endpoint.
func apiEndpoint(t testenv.T, host string) clusterv1.APIEndpoint {
	t.Helper()
	u, err := url.Parse(host)
	if err != nil {
		t.Fatalf("ostest: %v", err)
	}
	h, p, err := net.SplitHostPort(u.Host)
	if err != nil {
		t.Fatalf("ostest: endpoint %s: %v", host, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("ostest: endpoint %s: %v", host, err)
	}
	return clusterv1.APIEndpoint{Host: h, Port: int32(port)}
}

// kamajiSecretsOnly removes the Secrets that testenv.Orphan writes as
// kubeadm keeps them but the Kamaji provider does not: the etcd,
// front-proxy and service-account authorities of a hosted control plane
// stay in its TenantControlPlane's own Secrets, and Cluster API is given
// only <name>-ca and <name>-kubeconfig.
func (h *Hosted) kamajiSecretsOnly(t testenv.T) {
	t.Helper()
	for _, suffix := range []string{"etcd", "proxy", "sa"} {
		s := &corev1.Secret{}
		s.Namespace, s.Name = "default", h.Name+"-"+suffix
		if err := h.Mgmt.Client.Delete(context.Background(), s); err != nil {
			t.Fatalf("ostest: delete Secret %s: %v", s.Name, err)
		}
	}
}

// kamajiControlPlane creates the running KamajiControlPlane, as seed 004's
// quickstart wrote it but with the kubelet address order Kamaji defaults
// to in older releases (Hostname first, which ferry must change), and its
// status as the Kamaji controller reported it: ready and initialized.
func (h *Hosted) kamajiControlPlane(t testenv.T) {
	t.Helper()
	ctx := context.Background()
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"replicas": int64(1), "version": KamajiVersion, "dataStoreName": "default",
			"addons":            map[string]any{"coreDNS": map[string]any{}, "kubeProxy": map[string]any{}, "konnectivity": map[string]any{}},
			"kubelet":           map[string]any{"preferredAddressTypes": []any{"Hostname", "InternalIP", "ExternalIP"}},
			"network":           map[string]any{"serviceType": "LoadBalancer"},
			"controllerManager": map[string]any{"extraArgs": []any{"--cloud-provider=external"}},
			"apiServer":         map[string]any{"extraArgs": []any{"--cloud-provider=external"}},
		},
	}}
	u.SetGroupVersionKind(kube.KamajiGVK)
	u.SetNamespace("default")
	u.SetName(h.ControlPlaneName)
	if err := h.Mgmt.Client.Create(ctx, u); err != nil {
		t.Fatalf("ostest: create KamajiControlPlane: %v", err)
	}
	u.Object["status"] = map[string]any{
		"ready": true, "initialized": true, "externalManagedControlPlane": true,
		"replicas": int64(1), "readyReplicas": int64(1), "updatedReplicas": int64(1), "unavailableReplicas": int64(0),
		"version": KamajiVersion, "selector": "kamaji.clastix.io/name=" + h.ControlPlaneName,
	}
	if err := h.Mgmt.Client.Status().Update(ctx, u); err != nil {
		t.Fatalf("ostest: KamajiControlPlane status: %v", err)
	}
}

// cluster creates the Cluster as the quickstart left it: infrastructure
// from the Docker provider (whose controller, and its DockerCluster, are
// gone from this management cluster), control plane the
// KamajiControlPlane, endpoint the hosted API server.
func (h *Hosted) cluster(t testenv.T) {
	t.Helper()
	c := &clusterv1.Cluster{Spec: clusterv1.ClusterSpec{
		ClusterNetwork: &clusterv1.ClusterNetwork{
			ServiceDomain: "cluster.local",
			Pods:          &clusterv1.NetworkRanges{CIDRBlocks: []string{"192.168.0.0/16"}},
			Services:      &clusterv1.NetworkRanges{CIDRBlocks: []string{"10.96.0.0/12"}},
		},
		ControlPlaneEndpoint: h.ControlPlaneEndpoint,
		InfrastructureRef: &corev1.ObjectReference{APIVersion: "infrastructure.cluster.x-k8s.io/v1beta1", Kind: "DockerCluster",
			Namespace: "default", Name: h.Name},
		ControlPlaneRef: &corev1.ObjectReference{APIVersion: kube.KamajiGVK.GroupVersion().String(), Kind: kube.KamajiGVK.Kind,
			Namespace: "default", Name: h.ControlPlaneName},
	}}
	c.Namespace, c.Name = "default", h.Name
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.Mgmt.Client.Create(ctx, c); err != nil {
		t.Fatalf("ostest: create Cluster: %v", err)
	}
}

// Plan is a seed 004 adopt plan for the cluster on the fixture's cloud,
// approved up to approve (`""` for nothing): no API load balancer or
// floating IP, the CNI's security group rules, the kubelet address order
// and the cloud controller manager from ccmPath scheduled on the workers.
func (h *Hosted) Plan(approve, ccmPath string) string {
	return `apiVersion: ferry.dev/v1alpha1
kind: MigrationPlan
metadata:
  name: ` + h.Name + `
spec:
  cluster: {name: ` + h.Name + `, namespace: default}
  strategy: adopt
  target:
    identity: {cloudName: openstack}
    network: {name: ` + h.Network + `}
    subnets:
      - name: ` + h.Subnet + `
    sshKey: {name: capi-key-` + h.Suffix + `, publicKey: "` + h.PublicKey + `"}
    apiServer: {loadBalancer: false, floatingIP: false}
    cni: calico
    securityGroups:
      allowAllInClusterTraffic: false
      allNodesRules:
        - {name: BGP, description: Allow BGP among workers, direction: ingress, etherType: IPv4, protocol: tcp, portRangeMin: 179, portRangeMax: 179, remoteManagedGroups: [worker]}
        - {name: IP-in-IP, description: Allow IP-in-IP among workers, direction: ingress, etherType: IPv4, protocol: "4", remoteManagedGroups: [worker]}
    controlPlane:
      provider: KamajiControlPlane
      name: ` + h.ControlPlaneName + `
      kubelet:
        preferredAddressTypes: [InternalIP, ExternalIP, Hostname]
    workers:
      - {name: md-0, flavor: ` + h.Flavor + `, image: ` + h.Image + `, replicas: ` + strconv.Itoa(len(h.Workers)) + `}
  manifests:
    cloudControllerManager:
      path: ` + ccmPath + `
      nodeSelector: {}
      tolerations:
        - {key: node.cloudprovider.kubernetes.io/uninitialized, value: "true", effect: NoSchedule}
        - {key: node.cluster.x-k8s.io/uninitialized, operator: Exists, effect: NoSchedule}
  approve: ` + approve + `
`
}

// String names the cluster and its endpoint, for logs.
func (h *Hosted) String() string {
	return fmt.Sprintf("cluster %s (KamajiControlPlane %s at %s:%d, workers %v)", h.Name, h.ControlPlaneName, h.ControlPlaneEndpoint.Host, h.ControlPlaneEndpoint.Port, h.Workers)
}
