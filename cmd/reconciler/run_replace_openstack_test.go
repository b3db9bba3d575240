//go:build openstack

package main

import (
	"context"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/testing/ostest"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestRunReplaceOpenStack is seed 003 driven through pull requests on the
// real controllers and a real Gitea, merged by rebase: a cluster whose workers are CAPD machines (the real
// Cluster API controllers built them; CAPD's own controller is a labelled
// stand-in, as is Kamaji's for the hosted control plane) moves its
// workload onto a new pool that the real CAPO builds in the local Nova.
// The workload cluster runs pods on real nodes, the old cloud's and the new
// one's on two networks whose pods reach each other only through the VPN
// overlay the plan brings (a kernel VXLAN tunnel per node), and a caller on
// an old node of no Machine calls the web application's Service every
// 100 ms from before the first pull request to after cleanup (checkCalls).
// Pull requests approve prepare, network-bridge (the
// VPN client DaemonSet Running on every node), infrastructure, workers
// (three new servers ACTIVE, their nodes joined), cutover (each old node
// cordoned and drained through the eviction API with a budget of one
// disruption over three web replicas, the probe answered between nodes;
// a budget of none holds the first drain past its timeout, which the PR
// comment names, until the team lifts it) and cleanup (the old pool gone,
// the project's other servers kept). It runs on the distributed layout
// (startClusteredOnGitea): the drains are taken by three executor
// replicas on a three-node NATS cluster, and after prepare the leading
// reconciler stops and the standby carries the migration on.
func TestRunReplaceOpenStack(t *testing.T) {
	f := ostest.NewReplaceable(t, "tenant-a", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the cluster at the end:\n%s", f.Describe(context.Background()))
		}
	})
	x := &replaceRun{t: t, ctx: ctx, f: f, gatewayFlavor: f.Flavor}
	if err := f.Workload.RunWeb(ctx); err != nil {
		t.Fatal(err)
	}
	x.probe = f.Workload.NewProbe()
	t.Cleanup(x.probe.Close)
	x.startCaller()
	x.m = startClusteredMigration(t, ctx, f.Mgmt, "tenant-a", testenv.MergeRebase,
		map[string]string{"plans/tenant-a.yaml": x.plan(`""`), "manifests/vpn-client.yaml": testenv.VPNClientManifest},
		"--interval", "2s", "--comment-interval", "200ms")
	m, S, P := x.m, status.PhaseSucceeded, status.PhasePending

	m.approve("prepare", x.plan("prepare"), map[string]status.PhaseState{"prepare": S, "network-bridge": P})
	// The leading reconciler goes, as in a rolling update: the standby
	// takes the migration over from the status branch.
	m.handOver()
	m.approve("network-bridge", x.plan("network-bridge"), map[string]status.PhaseState{"network-bridge": S, "infrastructure": P})
	checkDaemonSet(ctx, t, f.Workload, "vpn-client", len(f.OldNodes)+1) // and the edge node
	x.resizeGateway()
	m.approve("infrastructure", x.plan("infrastructure"), map[string]status.PhaseState{"infrastructure": S, "workers": P})
	m.approve("workers", x.plan("workers"), map[string]status.PhaseState{"workers": S, "cutover": P})
	t.Logf("new nodes joined: %v", f.Booted())
	checkDaemonSet(ctx, t, f.Workload, "vpn-client", len(f.OldNodes)+1+3)
	x.cutover()
	if n := x.gw.freeze(); n < 1 {
		t.Errorf("%d gateway servers ACTIVE at the worst between the bridge and cleanup; the new one must be ACTIVE before the old one goes", n)
	}
	st := m.approve("cleanup", x.plan("cleanup"), map[string]status.PhaseState{"cutover": S, "cleanup": S})
	checkCleanedUp(ctx, t, f)
	x.gw.waitNone(t)
	checkBridgeKept(t, m, st)
	x.checkCalls()
	t.Logf("the old cloud's inventory in the status: %+v", st.Inventory)
	if len(st.Inventory) == 0 {
		t.Errorf("the status after cleanup has no inventory of the old cloud")
	}
}

// replaceRun is TestRunReplaceOpenStack's world: the fixture, the pull
// requests, the web application and its probe, and the gateway's watch.
type replaceRun struct {
	t             *testing.T
	ctx           context.Context
	f             *ostest.Replaceable
	m             *migration
	probe         *testenv.Probe
	caller        *testenv.Caller
	gw            *gatewayWatch
	gatewayFlavor string
}

// startCaller runs the caller on the old cloud's edge node, calling the
// web Service.
func (x *replaceRun) startCaller() {
	c, err := x.f.RunCaller(x.ctx)
	if err != nil {
		x.t.Fatal(err)
	}
	x.caller = c
}

// checkCalls checks what the caller counted through the whole migration
// (ostest.CallsKept).
func (x *replaceRun) checkCalls() {
	x.t.Logf("the caller on %s: %s", x.f.Edge, x.f.Calls(x.ctx, x.caller))
	for _, c := range x.f.CallsKept(x.ctx, x.caller) {
		x.t.Log(c)
		if !c.OK {
			x.t.Errorf("the caller through the migration: %s", c)
		}
	}
}

// plan is the replace plan approved up to approve, with a VPN gateway of
// the current flavor, the VPN client manifest and a cutover that probes
// the application.
func (x *replaceRun) plan(approve string) string {
	gateway := "    gateway: {name: vpn, flavor: " + x.gatewayFlavor + ", image: " + x.f.Image + "}\n"
	extra := "  manifests:\n    vpnOverlay: [manifests/vpn-client.yaml]\n" +
		"  cutover: {drainTimeout: 20s, probeURL: \"" + x.probe.URL + "/healthz\"}\n"
	return x.f.Plan(approve, 3, gateway, extra)
}

// resizeGateway checks the gateway network-bridge built, then gives it a
// bigger flavor by pull request: a new server, ACTIVE before the old one
// goes.
func (x *replaceRun) resizeGateway() {
	t, m := x.t, x.m
	x.gw = watchGateway(x.ctx, t, x.f, "vpn-")
	first := x.gw.waitOne(t, x.f.FlavorID)
	flavor2, flavor2ID := x.f.ExtraFlavor(t, "ferry.gateway", 640)
	x.gatewayFlavor = flavor2
	// The phase was approved by #2 already: this merge changes the plan,
	// not the approval, and the progress stays on #2.
	m.open("Resize the VPN gateway", "network-bridge", x.plan("network-bridge"))
	m.mergePR(testenv.GiteaReviewer)
	if second := x.gw.waitOne(t, flavor2ID); second == first {
		t.Errorf("the gateway kept server %s after its flavor changed", first)
	}
	m.phases(map[string]status.PhaseState{"network-bridge": status.PhaseSucceeded, "infrastructure": status.PhasePending})
}

// cutover approves the cutover with a budget of no disruption holding the
// db pod on the first old node past the drain's timeout: the PR comment
// names the budget, that node stays cordoned and no other is touched.
// Once the team lifts the budget, every old node is drained through the
// eviction API, the web budget holds and the probe answers.
func (x *replaceRun) cutover() {
	t, ctx, f, m, wl := x.t, x.ctx, x.f, x.m, x.f.Workload
	firstNode := f.OldNodes[0]
	createHeld(ctx, t, wl, firstNode)
	moving, err := wl.Pods(ctx, "default", testenv.WebLabels, func(p *corev1.Pod) bool { return slices.Contains(f.OldNodes, p.Spec.NodeName) })
	if err != nil || len(moving) == 0 {
		t.Fatalf("web pods on the old nodes before cutover: %d, %v", len(moving), err)
	}
	least := wl.WatchLeastHealthy(ctx, "default", testenv.WebLabels)
	// The overlay broken on the WAN: its pods run and its tunnels are
	// there, but no packet crosses, so its pods are not ready (their
	// health is traffic) and the cutover must not start, and say why.
	heal := f.Host.Drop(f.Old, f.New, "udp", testenv.VPNPort)
	waitOverlayDown(ctx, t, wl)
	m.open("Approve cutover", "cutover", x.plan("cutover"))
	m.mergePR(testenv.GiteaReviewer)
	t.Logf("progress comment while the overlay is down:\n%s", m.comment(m.pr, "progress/tenant-a", "VPN overlay manifests/vpn-client.yaml is not healthy"))
	for _, name := range f.OldNodes {
		var n corev1.Node
		testenv.MustGet(t, wl.Client, "", name, &n)
		if n.Spec.Unschedulable {
			t.Errorf("node %s cordoned while the overlay was down: the cutover started", name)
		}
	}
	heal()
	t.Logf("progress comment while the budget holds:\n%s", m.comment(m.pr, "progress/tenant-a", "PodDisruptionBudget default/db"))
	checkHeld(t, wl, f.OldNodes)
	if err := wl.Client.Delete(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"}}); err != nil {
		t.Fatal(err)
	}
	m.r.waitFor("every old node drained", func() bool { return drained(ctx, wl, f.OldNodes) })
	m.comment(m.pr, "progress/tenant-a", "| cutover | workload: probe Node "+f.OldNodes[len(f.OldNodes)-1]+" | Succeeded |")
	if n := least(); n < 2 {
		t.Errorf("%d web replicas healthy at the worst of the cutover; the budget allows one disruption of three", n)
	}
	for _, p := range moving {
		if !wl.Evicted(t, &p) {
			t.Errorf("web pod %s left %s without an eviction through the eviction API", p.Name, p.Spec.NodeName)
		}
	}
	if ok, answers := x.probe.Answered(); ok < len(f.OldNodes) || ok != answers {
		t.Errorf("the probe answered 200 %d times of %d; want one success per old node (%d) and no failure", ok, answers, len(f.OldNodes))
	}
}

// waitOverlayDown waits until the VPN client DaemonSet has a pod not
// ready.
func waitOverlayDown(ctx context.Context, t *testing.T, wl *testenv.Kube) {
	t.Helper()
	var ds appsv1.DaemonSet
	for ctx.Err() == nil {
		if err := wl.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "vpn-client"}, &ds); err == nil &&
			ds.Status.NumberReady < ds.Status.DesiredNumberScheduled {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("the VPN client's pods stayed ready with the overlay's packets dropped: %d of %d", ds.Status.NumberReady, ds.Status.DesiredNumberScheduled)
}

// checkHeld checks the drain held by a budget: the first node cordoned,
// the others not, since nothing after a failed drain may run.
func checkHeld(t *testing.T, wl *testenv.Kube, nodes []string) {
	t.Helper()
	for i, name := range nodes {
		var n corev1.Node
		testenv.MustGet(t, wl.Client, "", name, &n)
		if want := i == 0; n.Spec.Unschedulable != want {
			t.Errorf("node %s: cordoned %t while the drain of %s is held; want %t", name, n.Spec.Unschedulable, nodes[0], want)
		}
	}
}

// createHeld runs a db Deployment of one replica that prefers node, under
// a budget that allows no disruption.
// drained reports whether every node is cordoned and runs nothing but
// DaemonSet pods.
// checkCleanedUp checks the world after cleanup: the old pool and its
// Machines are gone, and so are the old nodes; the new servers are
// ACTIVE; the project's servers that ferry did not create are still there.
// createWorkload runs the application the migration must keep serving: a
// web Deployment of three replicas under a budget of one disruption.
// probe stands for the application's public URL: it answers 200 while a
// web pod serves and 503 when none does, as a load balancer in front of
// the pods would, and records every answer.
// answered is how many answers were 200, of how many.
// checkDaemonSet waits until DaemonSet name in kube-system has a Running,
// Ready pod on each of want nodes.
// gatewayWatch follows the gateway's servers in Nova (named with prefix)
// every half second: which are ACTIVE, and the fewest ACTIVE at once
// since the first was.
// waitOne waits until the one ACTIVE gateway server has flavor, and
// returns its ID.
// waitNone waits until no gateway server is ACTIVE.
// freeze ends the count of the fewest ACTIVE gateway servers (before
// cleanup, which deletes them) and returns it.
