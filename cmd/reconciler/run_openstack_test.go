//go:build openstack

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/forge/fakegithub"
	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/openstack/ostest"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/testenv"
)

// TestRunOpenStack is a seed 000 migration driven through three pull
// requests: `reconciler run` (executors in process, embedded NATS) watches
// a real Git server and writes to the GitHub stand-in; the management and
// workload clusters are real API servers, and the real Cluster API (core,
// kubeadm bootstrap, KubeadmControlPlane) and CAPO managers act on what
// ferry creates; the nodes' servers are in the local OpenStack. Pull
// request 1 approves cluster (preview, merge, phase runs), 2 the control
// plane, 3 the workers; the status lands on the status branch and in one
// progress comment per pull request. Then the adoption is checked against
// the world as it was before (ostest.Verify: the same servers, every
// Machine Running with its Node, nothing rolled out, no certificate
// regenerated, no stray port), and the workers are scaled up by one, which
// the real controllers build as a new server. The cluster's endpoint is a
// floating IP of its control-plane server (on a loopback subnet, so that
// the workload API server listens on it); after each phase it must answer
// through it, and the floating IP must still be the server's.
func TestRunOpenStack(t *testing.T) {
	f := ostest.NewAdoptable(t, "capi-quickstart")
	mgmt := f.Mgmt
	before := f.Record(t)
	testenv.StartManagers(t, mgmt)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()

	plan := func(approve string) string {
		return f.Plan(approve, "  manifests:\n    cloudControllerManager: {path: manifests/ccm.yaml}\n")
	}
	seed := testenv.SeedDir(t, map[string]string{"plans/capi-quickstart.yaml": plan(`""`), "manifests/ccm.yaml": testenv.CCMManifest})
	g := testenv.StartGit(t, seed)
	gh := fakegithub.New("ferry-dev", "plans", "ghp_stand_in_token")
	t.Cleanup(gh.Close)
	r := startRun(t, ctx, g, gh, mgmt, nil, "--interval", "2s", "--comment-interval", "200ms")
	fatal := r.fatalf
	w := &prWatch{ctx: ctx, plan: "capi-quickstart", gh: gh, fatal: fatal,
		reader: status.Store{Git: &gitsource.Writer{URL: g.URL, Branch: status.DefaultBranch}}}
	waitPhases, waitComment := w.phases, w.comment

	repo := testenv.NewPlansRepo(t, g, gh)
	repo.WebhookURL, repo.WebhookSecret = r.webhookURL, r.webhookSecret
	repo.OpenPR(1, "Approve cluster", "alice", map[string]string{"plans/capi-quickstart.yaml": plan("cluster")})
	preview := waitComment(1, "preview", "Steps of phase cluster:")
	if !strings.Contains(preview, "ensure-keypair Keypair capi-key-"+f.Suffix) {
		t.Errorf("preview of #1 lacks the keypair step:\n%s", preview)
	}
	merge1 := repo.MergePR(1, "bob")
	st := waitPhases(map[string]status.PhaseState{"cluster": status.PhaseSucceeded, "control-plane": status.PhasePending})
	if len(st.ApprovedBy) == 0 || st.ApprovedBy[0] != (status.Approval{Phase: "cluster", By: "bob", PR: 1, Commit: merge1}) {
		t.Errorf("approvedBy = %+v", st.ApprovedBy)
	}
	var cl clusterv1.Cluster
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "capi-quickstart"}, &cl); err != nil || cl.Spec.Paused {
		t.Fatalf("Cluster after phase cluster: paused=%t, %v", cl.Spec.Paused, err)
	}
	waitComment(1, "progress/capi-quickstart", "| cluster | Succeeded |")
	endpointKept := func(after string) {
		t.Helper()
		if c := f.CheckEndpoint(ctx); !c.OK {
			t.Errorf("after phase %s: %s", after, c)
		}
	}
	endpointKept("cluster")

	repo.OpenPR(2, "Approve control-plane", "alice", map[string]string{"plans/capi-quickstart.yaml": plan("control-plane")})
	waitComment(2, "preview", "Steps of phase control-plane:")
	repo.MergePR(2, "carol")
	waitPhases(map[string]status.PhaseState{"cluster": status.PhaseSucceeded, "control-plane": status.PhaseSucceeded, "workers": status.PhasePending})
	waitComment(2, "progress/capi-quickstart", "| control-plane | Succeeded |")
	endpointKept("control-plane")

	repo.OpenPR(3, "Approve workers", "alice", map[string]string{"plans/capi-quickstart.yaml": plan("workers")})
	waitComment(3, "preview", "Steps of phase workers:")
	merge3 := repo.MergePR(3, "carol")
	st = waitPhases(map[string]status.PhaseState{"cluster": status.PhaseSucceeded, "control-plane": status.PhaseSucceeded, "workers": status.PhaseSucceeded})
	unpaused := time.Now() // the workers' unpause was before this
	endpointKept("workers")
	found := false
	for _, a := range st.ApprovedBy {
		found = found || a == (status.Approval{Phase: "workers", By: "carol", PR: 3, Commit: merge3})
	}
	if !found {
		t.Errorf("approvedBy = %+v; want workers approved by carol in #3", st.ApprovedBy)
	}
	var mds clusterv1.MachineDeploymentList
	if err := mgmt.Client.List(ctx, &mds, client.InNamespace("default")); err != nil || len(mds.Items) != 1 || mds.Items[0].Spec.Paused {
		t.Errorf("MachineDeployments after workers: %d, %v", len(mds.Items), err)
	}
	waitComment(3, "progress/capi-quickstart", "| workers | Succeeded |")
	w.successStatuses(merge3, 3)

	// What the real controllers made of it.
	for _, c := range f.VerifyUntil(ctx, before, unpaused, 2*time.Minute) {
		t.Log(c)
		if !c.OK {
			t.Errorf("adoption check failed: %s", c)
		}
	}
	if t.Failed() {
		return
	}
	for _, c := range f.ScaleUp(ctx, "capi-quickstart-md-0") {
		t.Log(c)
		if !c.OK {
			t.Errorf("scale-up check failed: %s", c)
		}
	}
}

// prWatch waits for what `reconciler run` writes back about one plan: its
// status on the status branch, and comments on pull requests.
type prWatch struct {
	ctx    context.Context
	plan   string
	reader status.Store
	gh     *fakegithub.Server
	fatal  func(format string, args ...any)
}

// phases waits until the plan's phases are in the states of want, and
// returns that status.
func (w *prWatch) phases(want map[string]status.PhaseState) *status.PlanStatus {
	var st *status.PlanStatus
	for w.ctx.Err() == nil {
		var err error
		st, err = w.reader.Read(w.ctx, w.plan)
		if err == nil && phasesAre(st, want) {
			return st
		}
		time.Sleep(time.Second)
	}
	w.fatal("phases did not reach %v; last status %+v", want, st)
	return nil
}

// comment waits for a comment on pull request pr with the marker of key
// that contains want, and returns its body.
func (w *prWatch) comment(pr int, key, want string) string {
	for w.ctx.Err() == nil {
		for _, c := range w.gh.Comments(pr) {
			if strings.HasPrefix(c.Body, forge.Marker(key)) && strings.Contains(c.Body, want) {
				return c.Body
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	w.fatal("no %s comment on #%d with %q; comments: %+v", key, pr, want, w.gh.Comments(pr))
	return ""
}

// successStatuses waits for n success commit statuses of the plan's phases
// on commit sha.
func (w *prWatch) successStatuses(sha string, n int) {
	for w.ctx.Err() == nil {
		success := 0
		for _, s := range w.gh.Statuses() {
			if s.SHA == sha && s.State == forge.StateSuccess && strings.HasPrefix(s.Context, "ferry/"+w.plan+"/") {
				success++
			}
		}
		if success >= n {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	w.fatal("no %d success statuses for the phases on %s: %+v", n, sha, w.gh.Statuses())
}
