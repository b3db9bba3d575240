package ostest

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// Adoptable is a seed 000 cluster ready to be adopted onto the local
// OpenStack: a fixture in the cloud, a management API server with the
// orphaned cluster (Secrets kept, CAPI objects gone) and its identity
// Secret holding the project's clouds.yaml, and a workload API server,
// running with the cluster's authorities, whose Nodes are named like the
// fixture's servers.
type Adoptable struct {
	*Fixture
	// Name is the cluster's name, in namespace default.
	Name           string
	Mgmt, Workload *testenv.Kube
	// PKI holds the authorities the workload API server runs with and the
	// cluster's Secrets hold.
	PKI *testenv.PKI
	// Endpoint is the control-plane endpoint's address: a floating IP of
	// the first control-plane server's port, on which the workload API
	// server listens. EndpointFIP and EndpointPort are the floating IP's
	// and that port's IDs.
	Endpoint, EndpointFIP, EndpointPort string
	// ControlPlane and Workers are the node (and server) names, sorted.
	ControlPlane, Workers []string
	// Nodes are the workload cluster's real nodes (NewAdoptableOn), on
	// network ServerNet; nil where a fixture writes its Nodes
	// (testenv.Orphan).
	Nodes     *testenv.RealNodes
	ServerNet *testenv.Network
}

// NewAdoptable builds an Adoptable cluster named name; everything goes
// when t ends.
func NewAdoptable(t testenv.T, name string) *Adoptable {
	t.Helper()
	return NewAdoptableWith(t, name, testenv.KubeOptions{})
}

// NewAdoptableWith is NewAdoptable with the management API server started
// with mgmt: on a network's host address, taking real nodes, for ferry
// installed in it as pods (testenv.KubeOptions.Nodes).
func NewAdoptableWith(t testenv.T, name string, mgmt testenv.KubeOptions) *Adoptable {
	t.Helper()
	return NewAdoptableOn(t, name, mgmt, nil)
}

// NewAdoptableOn is NewAdoptableWith whose workload cluster runs a real
// kubelet per server on a network of host's (the servers' network),
// named like the server and registered as kubeadm registers a node
// without a cloud provider: no provider ID, which the adoption sets; the
// control-plane nodes carry kubeadm's role label and taint. Its API
// server runs a scheduler and a controller manager, so that kube-system's
// Deployments and DaemonSets have pods on them as a real cluster's do.
// host nil is NewAdoptableWith: the fixture writes the Nodes and no
// kubelet runs (testenv.Orphan, a stand-in).
func NewAdoptableOn(t testenv.T, name string, mgmt testenv.KubeOptions, host *testenv.Host) *Adoptable {
	t.Helper()
	a := newNodes(t, name, NodeSuffixes)
	a.floatingEndpoint(t)
	a.Mgmt = testenv.StartKubeWith(t, mgmt)
	opts := testenv.KubeOptions{PKI: a.PKI, Address: a.Endpoint}
	a.serverNet(host, &opts)
	a.Workload = testenv.StartKubeWith(t, opts)
	a.orphanOn(t, host)
	a.identitySecret(t)
	return a
}

// serverNet makes the servers' network on host, for real nodes, and has
// the workload API server opts describe run their scheduler and
// controller manager; nothing when host is nil.
func (a *Adoptable) serverNet(host *testenv.Host, opts *testenv.KubeOptions) {
	if host != nil {
		a.ServerNet, opts.Nodes = host.Network("servers"), true
	}
}

// orphanOn is orphan with the Nodes registered by real kubelets on
// ServerNet instead of written by the fixture; with host nil it is
// orphan.
func (a *Adoptable) orphanOn(t testenv.T, host *testenv.Host) {
	t.Helper()
	if host == nil {
		a.orphan(t)
		return
	}
	testenv.Orphan(t, a.Mgmt, a.Workload, testenv.OrphanedCluster{
		Name: a.Name, Namespace: "default", KubeletVersion: "v1.31.4", PKI: a.PKI,
	})
	var specs []testenv.NodeSpec
	for _, name := range a.ControlPlane {
		specs = append(specs, testenv.NodeSpec{Name: name, Network: a.ServerNet,
			Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""},
			Taints: []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}})
	}
	for _, name := range a.Workers {
		specs = append(specs, testenv.NodeSpec{Name: name, Network: a.ServerNet})
	}
	a.Nodes = host.StartNodes(a.Workload, nil, specs...)
}

// newNodes builds the cloud part shared by the fixtures of this package:
// a Fixture whose servers carry suffixes, the node names sorted into
// control plane and workers, and the cluster's PKI.
func newNodes(t testenv.T, name string, suffixes []string) *Adoptable {
	t.Helper()
	a := &Adoptable{Fixture: newFixture(t, name, suffixes), Name: name}
	for node := range a.Servers {
		if strings.Contains(node, "control-plane") {
			a.ControlPlane = append(a.ControlPlane, node)
		} else {
			a.Workers = append(a.Workers, node)
		}
	}
	sort.Strings(a.ControlPlane)
	sort.Strings(a.Workers)
	a.PKI = testenv.NewPKI(t, name)
	return a
}

// orphan creates the running cluster in Mgmt and Workload (testenv.Orphan):
// its Secrets, and Nodes named like the servers with their fixed IPs.
func (a *Adoptable) orphan(t testenv.T) {
	t.Helper()
	testenv.Orphan(t, a.Mgmt, a.Workload, testenv.OrphanedCluster{
		Name: a.Name, Namespace: "default",
		ControlPlaneNodes: a.ControlPlane, WorkerNodes: a.Workers, KubeletVersion: "v1.31.4",
		PKI: a.PKI, NodeAddresses: func(node string) string { return a.Addresses[node] },
	})
}

// identitySecret creates <name>-cloud-config, the CAPO identity Secret
// with the project's clouds.yaml, which Plan's identity names.
func (a *Adoptable) identitySecret(t testenv.T) {
	t.Helper()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: a.Name + "-cloud-config"},
		Data:       map[string][]byte{"clouds.yaml": a.Creds.CloudsYAML},
	}
	if err := a.Mgmt.Client.Create(context.Background(), secret); err != nil {
		t.Fatalf("ostest: create the identity Secret: %v", err)
	}
}

// floatingEndpoint gives the first control-plane server's port a floating
// IP, the cluster's endpoint, as a cluster that an API load balancer does
// not front has it.
func (a *Adoptable) floatingEndpoint(t testenv.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := a.Servers[a.ControlPlane[0]]
	pages, err := ports.List(a.admin.Network, ports.ListOpts{DeviceID: id}).AllPages(ctx)
	if err != nil {
		t.Fatalf("ostest: ports of server %s: %v", id, err)
	}
	list, err := ports.ExtractPorts(pages)
	if err != nil || len(list) == 0 {
		t.Fatalf("ostest: ports of server %s: %d, %v", id, len(list), err)
	}
	fip, err := floatingips.Create(ctx, a.admin.Network, floatingips.CreateOpts{
		FloatingNetworkID: a.ExternalNetworkID, PortID: list[0].ID, ProjectID: a.ProjectID,
	}).Extract()
	if err != nil {
		t.Fatalf("ostest: floating IP for server %s: %v", id, err)
	}
	t.Cleanup(func() { _ = floatingips.Delete(context.Background(), a.admin.Network, fip.ID).ExtractErr() })
	a.Endpoint, a.EndpointFIP, a.EndpointPort = fip.FloatingIP, fip.ID, list[0].ID
}

// CheckEndpoint checks that the cluster's endpoint answers, through the
// floating IP, and that the floating IP is still the control-plane
// server's.
func (a *Adoptable) CheckEndpoint(ctx context.Context) Check {
	c := Check{Name: "endpoint kept"}
	fip, err := floatingips.Get(ctx, a.admin.Network, a.EndpointFIP).Extract()
	if err != nil {
		c.Detail = fmt.Sprintf("floating IP %s: %v", a.Endpoint, err)
		return c
	}
	if fip.PortID != a.EndpointPort {
		c.Detail = fmt.Sprintf("floating IP %s is on port %q, not the control-plane server's %s", a.Endpoint, fip.PortID, a.EndpointPort)
		return c
	}
	cs, err := kubernetes.NewForConfig(a.Workload.Config)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		c.Detail = fmt.Sprintf("%s does not answer: %v", a.Workload.Config.Host, err)
		return c
	}
	c.OK = true
	c.Detail = fmt.Sprintf("%s answers /readyz %q through floating IP %s, still on the control-plane server's port", a.Workload.Config.Host, body, a.Endpoint)
	return c
}

// Plan is an adopt plan for the cluster on the fixture's cloud (its
// networks, flavor, image and a fresh SSH key), approved up to approve
// (`""` for nothing); extra is appended to spec, e.g. a manifests section.
func (a *Adoptable) Plan(approve, extra string) string {
	return `apiVersion: ferry.dev/v1alpha1
kind: MigrationPlan
metadata:
  name: ` + a.Name + `
spec:
  cluster: {name: ` + a.Name + `, namespace: default}
  strategy: adopt
  target:
    identity: {cloudName: openstack}
    externalNetwork: {name: ` + a.ExternalNetwork + `}
    network: {name: ` + a.Network + `}
    sshKey: {name: capi-key-` + a.Suffix + `, publicKey: "` + a.PublicKey + `"}
    controlPlane: {provider: KubeadmControlPlane, flavor: ` + a.Flavor + `, image: ` + a.Image + `}
    workers:
      - {name: md-0, flavor: ` + a.Flavor + `, image: ` + a.Image + `, replicas: ` + strconv.Itoa(len(a.Workers)) + `}
` + extra + `  approve: ` + approve + `
`
}
