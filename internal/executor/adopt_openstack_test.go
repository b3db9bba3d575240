//go:build openstack

package executor_test

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/bootstrap/kubeadm/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/controlplane/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/executor"
	"github.com/ferry-dev/ferry/internal/executor/kube"
	"github.com/ferry-dev/ferry/internal/executor/openstack"
	"github.com/ferry-dev/ferry/internal/executor/workload"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/observer"
	"github.com/ferry-dev/ferry/internal/planfile"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/ostest"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// moveSecret moves Secret ns/name to toNS/to, creating toNS when needed.
func moveSecret(t *testing.T, ctx context.Context, a *ostest.Adoptable, ns, name, toNS, to string) {
	t.Helper()
	c := a.Mgmt.Client
	var sec corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &sec); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: toNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	moved := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: toNS, Name: to, Labels: sec.Labels}, Type: sec.Type, Data: sec.Data}
	if err := c.Create(ctx, moved); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, &sec); err != nil {
		t.Fatal(err)
	}
}

// TestAdoptOpenStack adopts a seed 000 cluster with the three executors
// alone, past the real Cluster API and CAPO managers and the local
// OpenStack: the real planner plans against a real observation (management
// and workload clusters, the cloud), every step of the runnable group is
// executed twice, as a redelivery would, and the loop observes and plans
// again until nothing is left. Wait steps wait for the real controllers.
// The service-account Secret and the cloud's credentials are copied from
// where seed 000 keeps them. Every object is checked field by field
// (checkAdopted), and then
// ostest.Verify checks the world against how it was before: the same
// servers, every Machine Running with its Node, nothing rolled out, no
// certificate regenerated, no stray port, the endpoint kept.
func TestAdoptOpenStack(t *testing.T) {
	a := ostest.NewAdoptable(t, "capi-quickstart")
	before := a.Record(t)
	testenv.StartManagers(t, a.Mgmt)
	ctx, cancel := context.WithTimeout(logging.With(context.Background(), testenv.Logger(t)), 10*time.Minute)
	defer cancel()

	// As seed 000 finds it: the service-account Secret only in a backup
	// namespace, the cloud's credentials in ferry-system; ferry copies both.
	moveSecret(t, ctx, a, "default", a.Name+"-sa", "capi-backup", a.Name+"-sa")
	moveSecret(t, ctx, a, "default", a.Name+"-cloud-config", "ferry-system", "openstack-credentials")
	text := strings.Replace(a.Plan("workers", "  adopt: {secretsFrom: capi-backup}\n"),
		"identity: {cloudName: openstack}", "identity: {cloudName: openstack, from: {namespace: ferry-system, name: openstack-credentials}}", 1)
	text = strings.Replace(text, "    network: {name: "+a.Network+"}\n", "    network: {name: "+a.Network+"}\n    subnets: [{name: "+a.Subnet+"}]\n", 1)
	f, err := planfile.Decode("plans/capi-quickstart.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	plan := f.Plan
	kube, err := kube.New(a.Mgmt.Config)
	if err != nil {
		t.Fatal(err)
	}
	execs := map[step.Kind]executor.Executor{
		step.Kube:      kube,
		step.OpenStack: &openstack.Executor{Client: a.Mgmt.Client},
		step.Workload:  &workload.Executor{Client: a.Mgmt.Client},
	}
	obs := &observer.Observer{Client: a.Mgmt.Client, Cloud: &observer.OpenStack{Client: a.Mgmt.Client, MaxAge: -1}}

	ran, res := runAdoption(t, ctx, plan, obs, func(*observed.Snapshot) {}, func(st step.Step) {
		ev := events.NewStepEvent(plan.Metadata.Name, "rev-1", st, time.Now())
		for attempt := 1; attempt <= 2; attempt++ {
			rep, err := execs[st.Executor].Execute(ctx, ev)
			if err != nil {
				t.Fatalf("%s, attempt %d: %v", st.Key, attempt, err)
			}
			t.Logf("%s (attempt %d): %s", st.Key, attempt, rep.Message)
		}
	})
	for _, ph := range res.Phases {
		if ph.State != planner.Succeeded {
			t.Errorf("phase %s is %s (%s); want Succeeded", ph.Name, ph.State, ph.Reason)
		}
	}
	for _, want := range []string{"bind OpenStackServer", "set-provider-id Node"} {
		if !strings.Contains(strings.Join(ran, "\n"), want) {
			t.Errorf("no step %q ran:\n%s", want, strings.Join(ran, "\n"))
		}
	}
	unpaused := time.Now()
	checkAdopted(t, a.Mgmt.Client, a.Workload, adopted{
		cpNode: a.ControlPlane[0], workers: a.Workers, servers: a.Servers,
		network: a.Network, subnet: a.Subnet, externalNetwork: a.ExternalNetwork,
		cpFlavor: a.Flavor, mdFlavor: a.Flavor, image: a.Image, sshKey: "capi-key-" + a.Suffix,
	})

	for _, c := range a.VerifyUntil(ctx, before, unpaused, 2*time.Minute) {
		t.Log(c)
		if !c.OK {
			t.Errorf("adoption check failed: %s", c)
		}
	}
}

// runAdoption observes, plans and runs the next runnable group, again and
// again, until nothing is left: adjust edits each snapshot before it is
// planned from, run carries out one step. It returns one line per group
// run ("action Kind name + ...") and the last plan.
func runAdoption(t *testing.T, ctx context.Context, plan *v1alpha1.MigrationPlan, obs *observer.Observer,
	adjust func(*observed.Snapshot), run func(step.Step)) ([]string, *planner.Result) {
	t.Helper()
	var ran []string
	for round := 0; ; round++ {
		if round > 40 {
			t.Fatalf("no end after %d groups:\n%s", round, strings.Join(ran, "\n"))
		}
		snap, err := obs.Observe(ctx, plan, observed.Record{})
		if err != nil {
			t.Fatalf("observe: %v", err)
		}
		adjust(snap)
		res, err := planner.Plan(plan, snap)
		if err != nil {
			t.Fatal(err)
		}
		g := res.Next()
		if g == nil {
			return ran, res
		}
		var line []string
		for _, st := range g.Steps {
			line = append(line, string(st.Action)+" "+st.Target.Kind+" "+st.Target.Name)
			run(st)
		}
		ran = append(ran, strings.Join(line, " + "))
	}
}

// adopted are the names checkAdopted expects: the fixture's nodes
// and their servers, and the cloud's resources the plan names.
type adopted struct {
	cpNode             string
	workers            []string
	servers            map[string]string
	network, subnet    string
	externalNetwork    string
	cpFlavor, mdFlavor string
	image, sshKey      string
}

// checkAdopted checks the adopted cluster in the management cluster,
// object by object, against what the adopt scenario and docs/steps.md ask for.
func checkAdopted(t *testing.T, c client.Client, workload *testenv.Kube, w adopted) {
	t.Helper()
	const (
		cp     = "capi-quickstart-control-plane"
		md     = "capi-quickstart-md-0"
		ms     = "capi-quickstart-md-0-adopted"
		infra  = "infrastructure.cluster.x-k8s.io/v1beta1"
		plan   = cluster // the plan is named after the cluster
		config = "capi-quickstart-cloud-config"
	)
	identity := &infrav1.OpenStackIdentityReference{Name: config, CloudName: "openstack"}
	network := &infrav1.NetworkParam{Filter: &infrav1.NetworkFilter{Name: w.network}}

	// Secrets: copied byte for byte, never regenerated.
	for _, tc := range []struct{ name, fromNS, from string }{
		{cluster + "-sa", "capi-backup", cluster + "-sa"},
		{config, "ferry-system", "openstack-credentials"},
	} {
		var got, src corev1.Secret
		testenv.MustGet(t, c, namespace, tc.name, &got)
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: tc.fromNS, Name: tc.from}, &src); err != nil {
			t.Fatal(err)
		}
		for k, v := range src.Data {
			if !bytes.Equal(got.Data[k], v) {
				t.Errorf("Secret %s key %s differs from %s/%s", tc.name, k, tc.fromNS, tc.from)
			}
		}
		testenv.Expect(t, "Secret "+tc.name+" keys", len(got.Data), len(src.Data))
	}
	var cloud corev1.Secret
	testenv.MustGet(t, c, namespace, config, &cloud)
	testenv.Expect(t, "cloud-config move label", cloud.Labels["clusterctl.cluster.x-k8s.io/move"], "true")

	var cl clusterv1.Cluster
	testenv.MustGet(t, c, namespace, cluster, &cl)
	testenv.Expect(t, "Cluster paused", cl.Spec.Paused, false)
	testenv.Expect(t, "Cluster infrastructureRef", *cl.Spec.InfrastructureRef, refTo(infra, "OpenStackCluster", cluster))
	testenv.Expect(t, "Cluster controlPlaneRef", *cl.Spec.ControlPlaneRef, refTo("controlplane.cluster.x-k8s.io/v1beta1", "KubeadmControlPlane", cp))
	testenv.Expect(t, "Cluster controlPlaneEndpoint", cl.Spec.ControlPlaneEndpoint, workloadEndpoint(t, workload))

	var osc infrav1.OpenStackCluster
	testenv.MustGet(t, c, namespace, cluster, &osc)
	testenv.Expect(t, "OpenStackCluster identityRef", osc.Spec.IdentityRef, *identity)
	testenv.Expect(t, "OpenStackCluster network", osc.Spec.Network, network)
	testenv.Expect(t, "OpenStackCluster subnets", osc.Spec.Subnets, []infrav1.SubnetParam{{Filter: &infrav1.SubnetFilter{Name: w.subnet}}})
	testenv.Expect(t, "OpenStackCluster externalNetwork", osc.Spec.ExternalNetwork, &infrav1.NetworkParam{Filter: &infrav1.NetworkFilter{Name: w.externalNetwork}})
	// optional.Bool is its own pointer type: compare what it points at.
	testenv.Expect(t, "OpenStackCluster disableExternalNetwork", ptr.Deref((*bool)(osc.Spec.DisableExternalNetwork), true), false)
	// The endpoint is kept: no load balancer, no floating IP of CAPO's, and
	// its address recorded so that deleting a control-plane machine keeps it.
	testenv.Expect(t, "OpenStackCluster apiServerLoadBalancer", osc.Spec.APIServerLoadBalancer, &infrav1.APIServerLoadBalancer{Enabled: ptr.To(false)})
	testenv.Expect(t, "OpenStackCluster disableAPIServerFloatingIP", ptr.Deref((*bool)(osc.Spec.DisableAPIServerFloatingIP), false), true)
	testenv.Expect(t, "OpenStackCluster apiServerFloatingIP", ptr.Deref(osc.Spec.APIServerFloatingIP, ""), workloadEndpoint(t, workload).Host)
	testenv.Expect(t, "OpenStackCluster managedSecurityGroups", osc.Spec.ManagedSecurityGroups, (*infrav1.ManagedSecurityGroups)(nil))
	testenv.Expect(t, "OpenStackCluster controlPlaneEndpoint", *osc.Spec.ControlPlaneEndpoint, cl.Spec.ControlPlaneEndpoint)
	testenv.Expect(t, "OpenStackCluster controlPlaneAvailabilityZones", osc.Spec.ControlPlaneAvailabilityZones, []string{"nova"})

	var kc bootstrapv1.KubeadmConfig
	testenv.MustGet(t, c, namespace, w.cpNode, &kc)
	testenv.Expect(t, "KubeadmConfig kubernetesVersion", kc.Spec.ClusterConfiguration.KubernetesVersion, version)
	testenv.Expect(t, "KubeadmConfig initConfiguration", kc.Spec.InitConfiguration, (*bootstrapv1.InitConfiguration)(nil))
	testenv.Expect(t, "KubeadmConfig join kubelet args", kc.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs, map[string]string{"cloud-provider": "external"})

	var kcp controlplanev1.KubeadmControlPlane
	testenv.MustGet(t, c, namespace, cp, &kcp)
	testenv.Expect(t, "KubeadmControlPlane replicas", *kcp.Spec.Replicas, int32(1))
	testenv.Expect(t, "KubeadmControlPlane version", kcp.Spec.Version, version)
	testenv.Expect(t, "KubeadmControlPlane infrastructureRef", kcp.Spec.MachineTemplate.InfrastructureRef, refTo(infra, "OpenStackMachineTemplate", cp))
	// The same ClusterConfiguration and JoinConfiguration as the adopted
	// node's KubeadmConfig: KubeadmControlPlane finds it up to date.
	testenv.Expect(t, "KubeadmControlPlane clusterConfiguration", kcp.Spec.KubeadmConfigSpec.ClusterConfiguration, kc.Spec.ClusterConfiguration)
	testenv.Expect(t, "KubeadmControlPlane joinConfiguration", kcp.Spec.KubeadmConfigSpec.JoinConfiguration, kc.Spec.JoinConfiguration)

	var osmt infrav1.OpenStackMachineTemplate
	testenv.MustGet(t, c, namespace, cp, &osmt)
	testenv.Expect(t, "control-plane OpenStackMachineTemplate spec", osmt.Spec.Template.Spec, infrav1.OpenStackMachineSpec{
		Flavor: ptr.To(w.cpFlavor), Image: infrav1.ImageParam{Filter: &infrav1.ImageFilter{Name: ptr.To(w.image)}},
		SSHKeyName: w.sshKey, Ports: []infrav1.PortOpts{{Network: network}}, IdentityRef: identity,
	})
	testenv.MustGet(t, c, namespace, md, &osmt)
	testenv.Expect(t, "worker OpenStackMachineTemplate flavor", *osmt.Spec.Template.Spec.Flavor, w.mdFlavor)

	var kct bootstrapv1.KubeadmConfigTemplate
	testenv.MustGet(t, c, namespace, md, &kct)
	testenv.Expect(t, "KubeadmConfigTemplate kubelet args", kct.Spec.Template.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs, map[string]string{"cloud-provider": "external"})

	var d clusterv1.MachineDeployment
	testenv.MustGet(t, c, namespace, md, &d)
	selected := map[string]string{clusterv1.ClusterNameLabel: cluster, clusterv1.MachineDeploymentNameLabel: md}
	testenv.Expect(t, "MachineDeployment replicas", *d.Spec.Replicas, int32(2))
	testenv.Expect(t, "MachineDeployment selector", d.Spec.Selector.MatchLabels, selected)
	testenv.Expect(t, "MachineDeployment template labels", d.Spec.Template.Labels, selected)
	testenv.Expect(t, "MachineDeployment version", *d.Spec.Template.Spec.Version, version)
	testenv.Expect(t, "MachineDeployment failureDomain", *d.Spec.Template.Spec.FailureDomain, "nova")
	testenv.Expect(t, "MachineDeployment bootstrap", *d.Spec.Template.Spec.Bootstrap.ConfigRef, refTo("bootstrap.cluster.x-k8s.io/v1beta1", "KubeadmConfigTemplate", md))
	testenv.Expect(t, "MachineDeployment infrastructureRef", d.Spec.Template.Spec.InfrastructureRef, refTo(infra, "OpenStackMachineTemplate", md))

	var set clusterv1.MachineSet
	testenv.MustGet(t, c, namespace, ms, &set)
	testenv.Expect(t, "MachineSet owner", len(set.OwnerReferences) == 1 && set.OwnerReferences[0].UID == d.UID &&
		set.OwnerReferences[0].Kind == "MachineDeployment" && ptr.Deref(set.OwnerReferences[0].Controller, false), true)
	testenv.Expect(t, "MachineSet replicas", *set.Spec.Replicas, int32(2))
	testenv.Expect(t, "MachineSet selector template hash", set.Spec.Selector.MatchLabels[clusterv1.MachineDeploymentUniqueLabel], "adopted")
	testenv.Expect(t, "MachineSet template hash label", set.Labels[clusterv1.MachineDeploymentUniqueLabel], "adopted")
	testenv.Expect(t, "MachineDeployment strategy", d.Spec.Strategy != nil && d.Spec.Strategy.Type == clusterv1.RollingUpdateMachineDeploymentStrategyType, true)
	testenv.Expect(t, "MachineSet template spec", set.Spec.Template.Spec, d.Spec.Template.Spec)

	machines := []struct {
		node, deployment, set string
		controlPlane          bool
	}{{node: w.cpNode, controlPlane: true}, {node: w.workers[0], deployment: md, set: ms}, {node: w.workers[1], deployment: md, set: ms}}
	for _, tc := range machines {
		var m clusterv1.Machine
		testenv.MustGet(t, c, namespace, tc.node, &m)
		what := "Machine " + tc.node
		testenv.Expect(t, what+" adopted", m.Annotations[observed.AnnotationAdopted], plan)
		testenv.Expect(t, what+" providerID", *m.Spec.ProviderID, step.ProviderIDPrefix+w.servers[tc.node])
		testenv.Expect(t, what+" infrastructureRef", m.Spec.InfrastructureRef, refTo(infra, "OpenStackMachine", tc.node))
		testenv.Expect(t, what+" dataSecretName", ptr.Deref(m.Spec.Bootstrap.DataSecretName, ""), tc.node)
		testenv.Expect(t, what+" version", *m.Spec.Version, version)
		_, isCP := m.Labels[clusterv1.MachineControlPlaneLabel]
		testenv.Expect(t, what+" control-plane label", isCP, tc.controlPlane)
		testenv.Expect(t, what+" deployment label", m.Labels[clusterv1.MachineDeploymentNameLabel], tc.deployment)
		testenv.Expect(t, what+" set label", m.Labels[clusterv1.MachineSetNameLabel], tc.set)
		if tc.set != "" {
			testenv.Expect(t, what+" template hash label", m.Labels[clusterv1.MachineDeploymentUniqueLabel], "adopted")
		}
		if tc.controlPlane {
			testenv.Expect(t, what+" bootstrap", *m.Spec.Bootstrap.ConfigRef, refTo("bootstrap.cluster.x-k8s.io/v1beta1", "KubeadmConfig", tc.node))
			testenv.Expect(t, what+" control-plane-name label", m.Labels[clusterv1.MachineControlPlaneNameLabel], cp)
		}
		var osm infrav1.OpenStackMachine
		testenv.MustGet(t, c, namespace, tc.node, &osm)
		testenv.Expect(t, "OpenStackMachine "+tc.node+" providerID", *osm.Spec.ProviderID, step.ProviderIDPrefix+w.servers[tc.node])
		testenv.Expect(t, "OpenStackMachine "+tc.node+" identityRef", osm.Spec.IdentityRef, identity)
	}

	// Every object ferry made carries the cluster's label, and none is
	// still paused: every pause ferry set was lifted.
	for _, tc := range []struct {
		obj   func() client.Object
		names []string
	}{
		{func() client.Object { return &corev1.Secret{} }, []string{cluster + "-sa", config}},
		{func() client.Object { return &clusterv1.Cluster{} }, []string{cluster}},
		{func() client.Object { return &infrav1.OpenStackCluster{} }, []string{cluster}},
		{func() client.Object { return &bootstrapv1.KubeadmConfig{} }, []string{w.cpNode}},
		{func() client.Object { return &controlplanev1.KubeadmControlPlane{} }, []string{cp}},
		{func() client.Object { return &clusterv1.Machine{} }, []string{w.cpNode, w.workers[0], w.workers[1]}},
		{func() client.Object { return &infrav1.OpenStackMachine{} }, []string{w.cpNode, w.workers[0], w.workers[1]}},
		{func() client.Object { return &infrav1.OpenStackMachineTemplate{} }, []string{cp, md}},
		{func() client.Object { return &bootstrapv1.KubeadmConfigTemplate{} }, []string{md}},
		{func() client.Object { return &clusterv1.MachineDeployment{} }, []string{md}},
		{func() client.Object { return &clusterv1.MachineSet{} }, []string{ms}},
	} {
		for _, name := range tc.names {
			obj := tc.obj()
			testenv.MustGet(t, c, namespace, name, obj)
			what := fmt.Sprintf("%T %s", obj, name)
			testenv.Expect(t, what+" cluster-name label", obj.GetLabels()[clusterv1.ClusterNameLabel], cluster)
			for _, a := range []string{clusterv1.PausedAnnotation, observed.AnnotationPausedBy} {
				if _, ok := obj.GetAnnotations()[a]; ok {
					t.Errorf("%s still has annotation %s", what, a)
				}
			}
		}
	}
}

// workloadEndpoint is where the workload API server listens: the
// endpoint the Cluster must keep.
func workloadEndpoint(t *testing.T, workload *testenv.Kube) clusterv1.APIEndpoint {
	t.Helper()
	u, err := url.Parse(workload.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	var port int32
	if _, err := fmt.Sscan(u.Port(), &port); err != nil {
		t.Fatalf("port of %s: %v", workload.Config.Host, err)
	}
	return clusterv1.APIEndpoint{Host: u.Hostname(), Port: port}
}
