//go:build openstack

package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/forge/fakegithub"
	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/openstack/ostest"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/testenv"
)

// vpnClient is the VPN overlay's client DaemonSet (seed 003,
// worker/vpn-overlay), on every node old and new.
const vpnClient = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: vpn-client
  namespace: kube-system
spec:
  selector:
    matchLabels: {app: vpn-client}
  template:
    metadata:
      labels: {app: vpn-client}
    spec:
      containers:
        - name: openvpn
          image: registry.example.com/openvpn-client:2.6
`

// migration drives one plan through pull requests: each approves a phase,
// is previewed, merged, and its phase waited for in the status branch and
// in the progress comment.
type migration struct {
	t      *testing.T
	ctx    context.Context
	r      *running
	gh     *fakegithub.Server
	repo   *testenv.PlansRepo
	reader status.Store
	name   string
	pr     int
}

func (m *migration) approve(phase, content string, want map[string]status.PhaseState) *status.PlanStatus {
	m.t.Helper()
	m.pr++
	path := "plans/" + m.name + ".yaml"
	m.repo.OpenPR(m.pr, "Approve "+phase, "alice", map[string]string{path: content})
	m.comment(m.pr, "preview", "Steps of phase "+phase+":")
	m.repo.MergePR(m.pr, "bob")
	return m.phases(want)
}

func (m *migration) phases(want map[string]status.PhaseState) *status.PlanStatus {
	m.t.Helper()
	var st *status.PlanStatus
	for m.ctx.Err() == nil {
		var err error
		if st, err = m.reader.Read(m.ctx, m.name); err == nil && phasesAre(st, want) {
			return st
		}
		select {
		case <-m.r.exited:
			m.r.fatalf("reconciler run exited %d while waiting for phases %v", m.r.code, want)
		case <-time.After(500 * time.Millisecond):
		}
	}
	var got []string
	if st != nil {
		for _, p := range st.Phases {
			got = append(got, fmt.Sprintf("%s %s (%s)", p.Name, p.State, p.Reason))
		}
	}
	m.r.fatalf("phases never reached %v; last: %s", want, strings.Join(got, "; "))
	return nil
}

func (m *migration) comment(pr int, key, want string) string {
	m.t.Helper()
	var body string
	found := func() bool {
		for _, c := range m.gh.Comments(pr) {
			if strings.HasPrefix(c.Body, forge.Marker(key)) {
				body = c.Body
				if strings.Contains(c.Body, want) {
					return true
				}
			}
		}
		return false
	}
	for m.ctx.Err() == nil && !found() {
		select {
		case <-m.r.exited:
			m.r.fatalf("reconciler run exited %d while waiting for a %s comment on #%d", m.r.code, key, pr)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if m.ctx.Err() != nil {
		m.r.fatalf("no %s comment on #%d with %q; the last one:\n%s", key, pr, want, body)
	}
	return body
}

// TestRunReplaceOpenStack is seed 003 driven through pull requests on the
// real controllers: a cluster whose workers are CAPD machines (the real
// Cluster API controllers built them; CAPD's own controller is a labelled
// stand-in, as is Kamaji's for the hosted control plane) moves its
// workload onto a new pool that the real CAPO builds in the local Nova.
// The workload cluster runs pods (real scheduler and controller manager,
// hollow kubelets). Pull requests approve prepare, network-bridge (the
// VPN client DaemonSet Running on every node), infrastructure, workers
// (three new servers ACTIVE, their nodes joined), cutover (each old node
// cordoned and drained through the eviction API with a budget of one
// disruption over three web replicas, the probe answered between nodes;
// a budget of none holds the first drain past its timeout, which the PR
// comment names, until the team lifts it) and cleanup (the old pool gone,
// the project's other servers kept).
func TestRunReplaceOpenStack(t *testing.T) {
	f := ostest.NewReplaceable(t, "tenant-a", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	wl := f.Workload
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the cluster at the end:\n%s", f.Describe(context.Background()))
		}
	})
	web := map[string]string{"app": "web"}
	createWorkload(ctx, t, wl, web)
	probe := newProbe(t, wl, web)

	extra := "  manifests:\n    vpnOverlay: [manifests/vpn-client.yaml]\n" +
		"  cutover: {drainTimeout: 20s, probeURL: \"" + probe.URL + "/healthz\"}\n"
	gatewayFlavor := f.Flavor
	plan := func(approve string) string {
		return f.Plan(approve, 3, "    gateway: {name: vpn, flavor: "+gatewayFlavor+", image: "+f.Image+"}\n", extra)
	}
	seed := testenv.SeedDir(t, map[string]string{"plans/tenant-a.yaml": plan(`""`), "manifests/vpn-client.yaml": vpnClient})
	g := testenv.StartGit(t, seed)
	gh := fakegithub.New("ferry-dev", "plans", "ghp_stand_in_token")
	t.Cleanup(gh.Close)
	r := startRun(t, ctx, g, gh, f.Mgmt, nil, "--interval", "2s", "--comment-interval", "200ms")
	repo := testenv.NewPlansRepo(t, g, gh)
	repo.WebhookURL, repo.WebhookSecret = r.webhookURL, r.webhookSecret
	m := &migration{t: t, ctx: ctx, r: r, gh: gh, repo: repo, name: "tenant-a",
		reader: status.Store{Git: &gitsource.Writer{URL: g.URL, Branch: status.DefaultBranch}}}
	S, P := status.PhaseSucceeded, status.PhasePending

	m.approve("prepare", plan("prepare"), map[string]status.PhaseState{"prepare": S, "network-bridge": P})
	m.approve("network-bridge", plan("network-bridge"), map[string]status.PhaseState{"network-bridge": S, "infrastructure": P})
	checkDaemonSet(ctx, t, wl, "vpn-client", len(f.OldNodes))
	gw := watchGateway(ctx, t, f, "vpn-")
	first := gw.waitOne(t, f.FlavorID)
	// A bigger gateway: a new server, ACTIVE before the old one goes.
	flavor2, flavor2ID := f.ExtraFlavor(t, "ferry.gateway", 640)
	gatewayFlavor = flavor2
	m.pr++
	m.repo.OpenPR(m.pr, "Resize the VPN gateway", "alice", map[string]string{"plans/tenant-a.yaml": plan("network-bridge")})
	m.comment(m.pr, "preview", "Steps of phase network-bridge:")
	m.repo.MergePR(m.pr, "bob")
	second := gw.waitOne(t, flavor2ID)
	if second == first {
		t.Errorf("the gateway kept server %s after its flavor changed", first)
	}
	m.phases(map[string]status.PhaseState{"network-bridge": S, "infrastructure": P})
	m.approve("infrastructure", plan("infrastructure"), map[string]status.PhaseState{"infrastructure": S, "workers": P})
	m.approve("workers", plan("workers"), map[string]status.PhaseState{"workers": S, "cutover": P})
	t.Logf("new nodes joined: %v", f.Booted())
	checkDaemonSet(ctx, t, wl, "vpn-client", len(f.OldNodes)+3)

	// Cutover: a budget of no disruption holds the db pod on the first
	// old node past the drain's timeout.
	firstNode := f.OldNodes[0]
	createHeld(ctx, t, wl, firstNode)
	moving, err := wl.Pods(ctx, "default", web, func(p *corev1.Pod) bool { return slices.Contains(f.OldNodes, p.Spec.NodeName) })
	if err != nil || len(moving) == 0 {
		t.Fatalf("web pods on the old nodes before cutover: %d, %v", len(moving), err)
	}
	least := wl.WatchLeastHealthy(ctx, "default", web)
	m.pr++
	m.repo.OpenPR(m.pr, "Approve cutover", "alice", map[string]string{"plans/tenant-a.yaml": plan("cutover")})
	m.comment(m.pr, "preview", "Steps of phase cutover:")
	m.repo.MergePR(m.pr, "bob")
	held := m.comment(m.pr, "progress/tenant-a", "PodDisruptionBudget default/db")
	t.Logf("progress comment while the budget holds:\n%s", held)
	cordoned := func(name string) bool {
		var n corev1.Node
		testenv.MustGet(t, wl.Client, "", name, &n)
		return n.Spec.Unschedulable
	}
	if !cordoned(firstNode) {
		t.Errorf("node %s is not cordoned while its drain is held", firstNode)
	}
	for _, n := range f.OldNodes[1:] {
		if cordoned(n) {
			t.Errorf("node %s was cordoned while the drain of %s was held: nothing after a failed drain may run", n, firstNode)
		}
	}
	// The team lifts the budget; the retried drain goes on.
	if err := wl.Client.Delete(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"}}); err != nil {
		t.Fatal(err)
	}
	r.waitFor("every old node drained", func() bool { return drained(ctx, wl, f.OldNodes) })
	last := f.OldNodes[len(f.OldNodes)-1]
	m.comment(m.pr, "progress/tenant-a", "| cutover | workload: probe Node "+last+" | Succeeded |")
	if n := least(); n < 2 {
		t.Errorf("%d web replicas healthy at the worst of the cutover; the budget allows one disruption of three", n)
	}
	for _, p := range moving {
		if !wl.Evicted(t, p.Name) {
			t.Errorf("web pod %s left %s without an eviction through the eviction API", p.Name, p.Spec.NodeName)
		}
	}
	if ok, answers := probe.answered(); ok < len(f.OldNodes) || ok != answers {
		t.Errorf("the probe answered 200 %d times of %d; want one success per old node (%d) and no failure", ok, answers, len(f.OldNodes))
	}

	if n := gw.freeze(); n < 1 {
		t.Errorf("%d gateway servers ACTIVE at the worst between the bridge and cleanup; the new one must be ACTIVE before the old one goes", n)
	}
	st := m.approve("cleanup", plan("cleanup"), map[string]status.PhaseState{"cutover": S, "cleanup": S})
	checkCleanedUp(ctx, t, f)
	gw.waitNone(t)
	t.Logf("the old cloud's inventory in the status: %+v", st.Inventory)
	if len(st.Inventory) == 0 {
		t.Errorf("the status after cleanup has no inventory of the old cloud")
	}
}

// createHeld runs a db Deployment of one replica that prefers node, under
// a budget that allows no disruption.
func createHeld(ctx context.Context, t *testing.T, wl *testenv.Kube, node string) {
	t.Helper()
	labels := map[string]string{"app": "db"}
	prefer := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
		Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}
	objs := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Affinity: prefer, Containers: []corev1.Container{{Name: "db", Image: "registry.example.com/db:1.0"}}}}}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"}, Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(0)), Selector: &metav1.LabelSelector{MatchLabels: labels}}},
	}
	for _, o := range objs {
		if err := wl.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for ctx.Err() == nil {
		pods, err := wl.Pods(ctx, "default", labels, testenv.Serving)
		if err == nil && len(pods) == 1 && pods[0].Spec.NodeName == node {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("the db pod never served on %s: %v", node, ctx.Err())
}

// drained reports whether every node is cordoned and runs nothing but
// DaemonSet pods.
func drained(ctx context.Context, wl *testenv.Kube, nodes []string) bool {
	for _, name := range nodes {
		var n corev1.Node
		if wl.Client.Get(ctx, client.ObjectKey{Name: name}, &n) != nil || !n.Spec.Unschedulable {
			return false
		}
		var pods corev1.PodList
		if wl.Client.List(ctx, &pods, client.MatchingFields{"spec.nodeName": name}) != nil {
			return false
		}
		for _, p := range pods.Items {
			if !ownedByDaemonSet(&p) {
				return false
			}
		}
	}
	return true
}

func ownedByDaemonSet(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "DaemonSet" })
}

// checkCleanedUp checks the world after cleanup: the old pool and its
// Machines are gone, and so are the old nodes; the new servers are
// ACTIVE; the project's servers that ferry did not create are still there.
func checkCleanedUp(ctx context.Context, t *testing.T, f *ostest.Replaceable) {
	t.Helper()
	var machines clusterv1.MachineList
	if err := f.Mgmt.Client.List(ctx, &machines, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	newIDs := map[string]bool{}
	for _, m := range machines.Items {
		if m.Labels[clusterv1.MachineDeploymentNameLabel] == f.OldMD {
			t.Errorf("Machine %s of the old pool is still there", m.Name)
		}
		if id := ptr.Deref(m.Spec.ProviderID, ""); strings.HasPrefix(id, "openstack:///") {
			newIDs[strings.TrimPrefix(id, "openstack:///")] = true
		}
	}
	var md clusterv1.MachineDeployment
	if err := f.Mgmt.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: f.OldMD}, &md); !apierrors.IsNotFound(err) {
		t.Errorf("old MachineDeployment %s: %v; want it deleted", f.OldMD, err)
	}
	for _, name := range f.OldNodes {
		var n corev1.Node
		if err := f.Workload.Client.Get(ctx, client.ObjectKey{Name: name}, &n); !apierrors.IsNotFound(err) {
			t.Errorf("old Node %s: %v; want it deleted", name, err)
		}
	}
	servers, err := f.ProjectServers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	active := map[string]bool{}
	for _, s := range servers {
		active[s.ID] = s.Status == "ACTIVE"
	}
	if len(newIDs) != 3 {
		t.Errorf("%d Machines on OpenStack, want 3", len(newIDs))
	}
	for id := range newIDs {
		if !active[id] {
			t.Errorf("new server %s is not ACTIVE in Nova", id)
		}
	}
	for name, id := range f.Servers {
		if !active[id] {
			t.Errorf("server %s (%s), which ferry did not create, is gone or not ACTIVE", name, id)
		}
	}
}

// createWorkload runs the application the migration must keep serving: a
// web Deployment of three replicas under a budget of one disruption.
func createWorkload(ctx context.Context, t *testing.T, wl *testenv.Kube, labels map[string]string) {
	t.Helper()
	objs := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example.com/shop:1.0"}}}}}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}}},
	}
	for _, o := range objs {
		if err := wl.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for ctx.Err() == nil {
		if pods, err := wl.Pods(ctx, "default", labels, testenv.Serving); err == nil && len(pods) == 3 {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("three web replicas never served: %v", ctx.Err())
}

// probe stands for the application's public URL: it answers 200 while a
// web pod serves and 503 when none does, as a load balancer in front of
// the pods would, and records every answer.
type probe struct {
	*httptest.Server
	mu      sync.Mutex
	answers []int
}

func newProbe(t *testing.T, wl *testenv.Kube, labels map[string]string) *probe {
	p := &probe{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := http.StatusServiceUnavailable
		if pods, err := wl.Pods(r.Context(), "default", labels, testenv.Serving); err == nil && len(pods) > 0 {
			code = http.StatusOK
		}
		p.mu.Lock()
		p.answers = append(p.answers, code)
		p.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(p.Close)
	return p
}

// answered is how many answers were 200, of how many.
func (p *probe) answered() (ok, all int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.answers {
		if c == http.StatusOK {
			ok++
		}
	}
	return ok, len(p.answers)
}

// checkDaemonSet waits until DaemonSet name in kube-system has a Running,
// Ready pod on each of want nodes.
func checkDaemonSet(ctx context.Context, t *testing.T, wl *testenv.Kube, name string, want int) {
	t.Helper()
	var ds appsv1.DaemonSet
	for ctx.Err() == nil {
		if err := wl.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: name}, &ds); err == nil &&
			ds.Status.DesiredNumberScheduled == int32(want) && ds.Status.NumberReady == int32(want) {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Errorf("DaemonSet %s: %d of %d pods ready, want %d", name, ds.Status.NumberReady, ds.Status.DesiredNumberScheduled, want)
}

// gatewayWatch follows the gateway's servers in Nova (named with prefix)
// every half second: which are ACTIVE, and the fewest ACTIVE at once
// since the first was.
type gatewayWatch struct {
	mu     sync.Mutex
	active map[string]string // server ID -> flavor ID
	least  int
	frozen bool
	done   chan struct{}
	cancel context.CancelFunc
	ctx    context.Context
}

func watchGateway(ctx context.Context, t *testing.T, f *ostest.Replaceable, prefix string) *gatewayWatch {
	w := &gatewayWatch{least: -1, done: make(chan struct{})}
	w.ctx, w.cancel = context.WithCancel(ctx)
	go func() {
		defer close(w.done)
		for w.ctx.Err() == nil {
			if servers, err := f.ProjectServers(w.ctx); err == nil {
				active := map[string]string{}
				for _, s := range servers {
					if strings.HasPrefix(s.Name, prefix) && s.Status == "ACTIVE" {
						active[s.ID], _ = s.Flavor["id"].(string)
					}
				}
				w.mu.Lock()
				w.active = active
				switch {
				case w.frozen:
				case w.least < 0 && len(active) > 0:
					w.least = len(active)
				case w.least >= 0:
					w.least = min(w.least, len(active))
				}
				w.mu.Unlock()
			}
			time.Sleep(500 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { w.cancel(); <-w.done })
	return w
}

// waitOne waits until the one ACTIVE gateway server has flavor, and
// returns its ID.
func (w *gatewayWatch) waitOne(t *testing.T, flavor string) string {
	t.Helper()
	for w.ctx.Err() == nil {
		w.mu.Lock()
		active := w.active
		w.mu.Unlock()
		for id, f := range active {
			if len(active) == 1 && f == flavor {
				return id
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("no single ACTIVE gateway server of flavor %s: %v", flavor, w.ctx.Err())
	return ""
}

// waitNone waits until no gateway server is ACTIVE.
func (w *gatewayWatch) waitNone(t *testing.T) {
	t.Helper()
	for w.ctx.Err() == nil {
		w.mu.Lock()
		n := len(w.active)
		w.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Errorf("gateway servers still ACTIVE after cleanup: %v", w.ctx.Err())
}

// freeze ends the count of the fewest ACTIVE gateway servers (before
// cleanup, which deletes them) and returns it.
func (w *gatewayWatch) freeze() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.frozen = true
	return w.least
}
