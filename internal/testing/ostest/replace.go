package ostest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// Replaceable is a seed 003 cluster ready to be moved onto the local
// OpenStack by the replace strategy: a hosted control plane (a
// KamajiControlPlane, whose API server is the workload API server) and one
// pool of workers on another infrastructure, CAPD's Docker machines,
// built by the real Cluster API controllers. The workload cluster runs
// pods on real nodes (testenv.Host): the old cloud is a network of its
// own, the new one (OpenStack) another, joined through the host for the
// nodes' addresses only, as two clouds over a WAN; pods of one reach the
// other's only through the plan's VPN overlay (testenv.VPNClientManifest).
// The old cloud also has a node of no Machine, Edge, where a caller of
// the web application stays through the whole migration (RunCaller).
//
// Two controllers cannot run here and have labelled stand-ins: CAPD's (no
// Docker engine; testenv.StartDockerStandIn) and Kamaji's (its module is
// not served; testenv.StartKamajiStandIn). The new servers' boot, which
// would run kubeadm join, is ostest.Boot: each starts a real node on the
// new cloud's network.
type Replaceable struct {
	*Fixture
	// Name is the cluster's name, in namespace default.
	Name           string
	Mgmt, Workload *testenv.Kube
	PKI            *testenv.PKI
	// Nodes are the workload cluster's real nodes, with its scheduler and
	// controller manager; Old and New the two clouds' networks.
	Nodes    *testenv.RealNodes
	Host     *testenv.Host
	Old, New *testenv.Network
	// Edge is the old cloud's node of no Machine, tainted
	// ferry.test/edge: nothing but DaemonSets and the caller run there,
	// and no migration touches it.
	Edge string
	// OldMD is the old pool's MachineDeployment; OldNodes its nodes, sorted.
	OldMD    string
	OldNodes []string
	// Booted lists the nodes of new servers that joined so far.
	Booted func() []string
}

// NewReplaceable builds a Replaceable cluster named name with workers old
// nodes, and returns once the real controllers report the old pool ready
// with every node Ready; everything goes when t ends.
func NewReplaceable(t testenv.T, name string, workers int) *Replaceable {
	t.Helper()
	r := &Replaceable{Fixture: New(t, name), Name: name, OldMD: name + "-md-0", Edge: name + "-edge"}
	host := testenv.NewHost(t)
	r.Host = host
	r.Old, r.New = host.Network("old-cloud"), host.Network("openstack")
	host.Route(r.Old, r.New)
	r.PKI = testenv.NewPKI(t, name)
	r.Mgmt = testenv.StartKube(t)
	r.Workload = testenv.StartKubeWith(t, testenv.KubeOptions{PKI: r.PKI, Address: r.Old.HostIP, Nodes: true})
	testenv.Orphan(t, r.Mgmt, r.Workload, testenv.OrphanedCluster{Name: name, Namespace: "default", KubeletVersion: "v1.31.4", PKI: r.PKI})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-cloud-config"},
		Data:       map[string][]byte{"clouds.yaml": r.Creds.CloudsYAML},
	}
	must(t, "create the identity Secret", r.Mgmt.Client.Create(ctx, secret))
	r.Nodes = host.StartNodes(r.Workload, nil, testenv.NodeSpec{Name: r.Edge, Network: r.Old,
		Taints: []corev1.Taint{{Key: "ferry.test/edge", Effect: corev1.TaintEffectNoSchedule}}})
	testenv.StartManagers(t, r.Mgmt)
	testenv.StartKamajiStandIn(t, r.Mgmt)
	testenv.StartDockerStandIn(t, r.Mgmt, r.Nodes.On(r.Old))
	r.Booted = Boot(t, r.Mgmt, r.Nodes.On(r.New), "default")
	for _, obj := range r.oldCluster(t, workers) {
		must(t, fmt.Sprintf("create %s %s", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName()), r.Mgmt.Client.Create(ctx, obj))
	}
	must(t, "the old pool ready", r.waitOldPool(ctx, int32(workers)))
	must(t, "create the new pool's MachineHealthCheck", r.Mgmt.Client.Create(ctx, r.newPoolHealthCheck()))
	return r
}

// newPoolHealthCheck is the MachineHealthCheck a team keeps on the pool
// the plan builds (os-md-0), which the real Cluster API controller acts
// on: a Machine is deleted and built again when its server went to ERROR
// before it had a Node (CAPO sets its failure reason), or when it has no
// Node after newNodeStartup. The local Nova, on SQLite, sometimes fails a
// build under load with "database is locked", and leaves the server
// either in ERROR or, when the failure hits the write that would record
// it, in BUILD for good (make chaos LAYOUT=cluster, run 12 of seed
// 1795714997845634026); without the health check the pool would wait for
// that server forever.
func (r *Replaceable) newPoolHealthCheck() *clusterv1.MachineHealthCheck {
	pool := r.Name + "-os-md-0"
	return &clusterv1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: pool},
		Spec: clusterv1.MachineHealthCheckSpec{
			ClusterName:        r.Name,
			Selector:           metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.MachineDeploymentNameLabel: pool}},
			NodeStartupTimeout: &metav1.Duration{Duration: newNodeStartup},
		},
	}
}

// newNodeStartup is how long a new Machine may go without a Node before
// the health check replaces it: Cluster API's default is 10 minutes, as
// long as a whole chaos run, where a new node here joins within a minute
// of its Machine (17 s in that run, on a loaded 2-core machine). A slow
// boot taken for a stuck one costs a Machine built again, not a failure.
const newNodeStartup = 4 * time.Minute

func must(t testenv.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("ostest: %s: %v", what, err)
	}
}

// oldCluster is the cluster as Cluster API knows it before the move: a
// Cluster on a DockerCluster with a KamajiControlPlane, and the old pool's
// MachineDeployment with its templates, which the real controllers turn
// into Machines.
func (r *Replaceable) oldCluster(t testenv.T, workers int) []client.Object {
	ns, cp := "default", r.Name+"-control-plane"
	obj := func(apiVersion, kind, name string, spec map[string]any) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		o.SetAPIVersion(apiVersion)
		o.SetKind(kind)
		o.SetNamespace(ns)
		o.SetName(name)
		return o
	}
	ref := func(o *unstructured.Unstructured) *corev1.ObjectReference {
		return &corev1.ObjectReference{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: ns, Name: o.GetName()}
	}
	docker := obj("infrastructure.cluster.x-k8s.io/v1beta1", "DockerCluster", r.Name, map[string]any{})
	kamaji := obj("controlplane.cluster.x-k8s.io/v1alpha1", "KamajiControlPlane", cp, map[string]any{"version": "v1.31.4", "replicas": int64(2)})
	machineTemplate := obj("infrastructure.cluster.x-k8s.io/v1beta1", "DockerMachineTemplate", r.OldMD, map[string]any{"template": map[string]any{"spec": map[string]any{}}})
	configTemplate := obj("bootstrap.cluster.x-k8s.io/v1beta1", "KubeadmConfigTemplate", r.OldMD, map[string]any{"template": map[string]any{"spec": map[string]any{
		"joinConfiguration": map[string]any{"nodeRegistration": map[string]any{}}}}})
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r.Name}, Spec: clusterv1.ClusterSpec{
		ControlPlaneEndpoint: apiEndpoint(t, r.Workload.Config.Host),
		InfrastructureRef:    ref(docker), ControlPlaneRef: ref(kamaji),
	}}
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r.OldMD}, Spec: clusterv1.MachineDeploymentSpec{
		ClusterName: r.Name, Replicas: ptr.To(int32(workers)),
		Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
			ClusterName: r.Name, Version: ptr.To("v1.31.4"),
			Bootstrap:         clusterv1.Bootstrap{ConfigRef: ref(configTemplate)},
			InfrastructureRef: *ref(machineTemplate),
		}},
	}}
	return []client.Object{docker, kamaji, machineTemplate, configTemplate, cluster, md}
}

// waitOldPool waits for the old MachineDeployment to report want replicas
// ready, each Machine with a Ready Node, and records the nodes.
func (r *Replaceable) waitOldPool(ctx context.Context, want int32) error {
	last := "no MachineDeployment status yet"
	for ctx.Err() == nil {
		var md clusterv1.MachineDeployment
		var machines clusterv1.MachineList
		if err := r.Mgmt.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: r.OldMD}, &md); err == nil &&
			r.Mgmt.Client.List(ctx, &machines, client.InNamespace("default"), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: r.OldMD}) == nil {
			last = fmt.Sprintf("%d/%d ready, %d Machines", md.Status.ReadyReplicas, want, len(machines.Items))
			var nodes []string
			for _, m := range machines.Items {
				if m.Status.NodeRef != nil && m.Status.Phase == string(clusterv1.MachinePhaseRunning) {
					nodes = append(nodes, m.Status.NodeRef.Name)
				}
			}
			if md.Status.ReadyReplicas == want && len(nodes) == int(want) {
				slices.Sort(nodes)
				r.OldNodes = nodes
				return nil
			}
		}
		sleep(ctx, time.Second)
	}
	return fmt.Errorf("%w (last: %s)", ctx.Err(), last)
}

// Plan is a replace plan for the cluster onto the fixture's cloud, new
// pool os-md-0 of replicas machines, approved up to approve (`""` for
// nothing); replace is appended to spec.replace (a gateway), extra to spec
// (manifests, cutover).
func (r *Replaceable) Plan(approve string, replicas int, replace, extra string) string {
	return `apiVersion: ferry.dev/v1alpha1
kind: MigrationPlan
metadata:
  name: ` + r.Name + `
spec:
  cluster: {name: ` + r.Name + `, namespace: default}
  strategy: replace
  replace:
    oldMachineDeployments: [` + r.OldMD + `]
` + replace + `  target:
    identity: {cloudName: openstack}
    network: {name: ` + r.Network + `}
    sshKey: {name: replace-key-` + r.Suffix + `, publicKey: "` + r.PublicKey + `"}
    controlPlane:
      provider: KamajiControlPlane
      name: ` + r.Name + `-control-plane
      kubelet: {preferredAddressTypes: [InternalIP, ExternalIP, Hostname]}
    workers:
      - {name: os-md-0, flavor: ` + r.Flavor + `, image: ` + r.Image + `, replicas: ` + strconv.Itoa(replicas) + `}
` + extra + `  approve: ` + approve + `
`
}

// Describe summarizes the cluster for a failing test: each
// MachineDeployment's replicas, each Machine's phase, bootstrap and
// provider ID, and each Node's readiness.
func (r *Replaceable) Describe(ctx context.Context) string {
	var b strings.Builder
	var mds clusterv1.MachineDeploymentList
	if err := r.Mgmt.Client.List(ctx, &mds, client.InNamespace("default")); err != nil {
		return err.Error()
	}
	for _, d := range mds.Items {
		fmt.Fprintf(&b, "MachineDeployment %s: %d/%d ready, paused %t\n", d.Name, d.Status.ReadyReplicas, ptr.Deref(d.Spec.Replicas, 0), d.Spec.Paused)
	}
	var machines clusterv1.MachineList
	if err := r.Mgmt.Client.List(ctx, &machines, client.InNamespace("default")); err != nil {
		return err.Error()
	}
	for _, m := range machines.Items {
		node := ""
		if m.Status.NodeRef != nil {
			node = m.Status.NodeRef.Name
		}
		fmt.Fprintf(&b, "Machine %s: phase %s, bootstrap ready %t, infrastructure ready %t, providerID %q, node %q\n",
			m.Name, m.Status.Phase, m.Status.BootstrapReady, m.Status.InfrastructureReady, ptrString(m.Spec.ProviderID), node)
	}
	var nodes corev1.NodeList
	if err := r.Workload.Client.List(ctx, &nodes); err != nil {
		return b.String() + err.Error()
	}
	for _, n := range nodes.Items {
		fmt.Fprintf(&b, "Node %s: ready %t, unschedulable %t, providerID %q\n", n.Name, nodeReady(&n), n.Spec.Unschedulable, n.Spec.ProviderID)
	}
	return b.String()
}

func nodeReady(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
		return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
	})
}
