//go:build openstack

package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
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

func (m *migration) approve(phase, content string, want map[string]status.PhaseState) {
	m.t.Helper()
	m.pr++
	path := "plans/" + m.name + ".yaml"
	m.repo.OpenPR(m.pr, "Approve "+phase, "alice", map[string]string{path: content})
	m.comment(m.pr, "preview", "Steps of phase "+phase+":")
	m.repo.MergePR(m.pr, "bob")
	m.phases(want)
}

func (m *migration) phases(want map[string]status.PhaseState) *status.PlanStatus {
	m.t.Helper()
	var st *status.PlanStatus
	m.r.waitFor(fmt.Sprintf("phases %v", want), func() bool {
		var err error
		st, err = m.reader.Read(m.ctx, m.name)
		return err == nil && phasesAre(st, want)
	})
	return st
}

func (m *migration) comment(pr int, key, want string) string {
	m.t.Helper()
	var body string
	m.r.waitFor(fmt.Sprintf("a %s comment on #%d with %q", key, pr, want), func() bool {
		for _, c := range m.gh.Comments(pr) {
			if strings.HasPrefix(c.Body, forge.Marker(key)) && strings.Contains(c.Body, want) {
				body = c.Body
				return true
			}
		}
		return false
	})
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
	plan := func(approve string) string { return f.Plan(approve, 3, extra) }
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
	m.approve("infrastructure", plan("infrastructure"), map[string]status.PhaseState{"infrastructure": S, "workers": P})
	m.approve("workers", plan("workers"), map[string]status.PhaseState{"workers": S, "cutover": P})
	t.Logf("new nodes joined: %v", f.Booted())
	checkDaemonSet(ctx, t, wl, "vpn-client", len(f.OldNodes)+3)
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
