//go:build openstack

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/testenv"
)

// TestRunOpenStack is a seed 000 migration driven from Git: `reconciler run`
// (executors in process, embedded NATS) watches a real Git server; the
// management and workload clusters are real API servers, with stand-ins
// for the CAPI and CAPO controllers; the nodes' servers are in the local
// OpenStack. Approving cluster runs that phase; raising approve to workers
// runs the rest; the status lands on the status branch.
func TestRunOpenStack(t *testing.T) {
	f, mgmt, _, _ := adoptableCluster(t)
	testenv.StartControllerStandIns(t, mgmt, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	seed := t.TempDir()
	plan := func(approve string) string {
		return adoptPlan(f, approve, "  manifests:\n    cloudControllerManager: {path: manifests/ccm.yaml}\n")
	}
	write := func(dir, name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(seed, "plans/capi-quickstart.yaml", plan("cluster"))
	write(seed, "manifests/ccm.yaml", ccmManifest)
	g := testenv.StartGit(t, seed)

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, mgmt.Kubeconfig(t), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var mu sync.Mutex
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan int)
	go func() {
		done <- runReconciler(runCtx, []string{"--repo", g.URL, "--kubeconfig", kubeconfig, "--data-dir", t.TempDir(),
			"--interval", "2s", "--metrics-addr", ""}, &bytes.Buffer{}, &lockedWriter{mu: &mu, w: &logs})
	}()
	defer func() {
		stop()
		if code := <-done; code != 0 {
			t.Errorf("reconciler run exited %d", code)
		}
	}()

	reader := &status.Writer{URL: g.URL, Branch: status.DefaultBranch}
	waitPhases := func(want map[string]status.PhaseState) *status.PlanStatus {
		t.Helper()
		var st *status.PlanStatus
		for ctx.Err() == nil {
			var err error
			st, err = reader.Read(ctx, "capi-quickstart")
			if err == nil && phasesAre(st, want) {
				return st
			}
			time.Sleep(time.Second)
		}
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("phases did not reach %v; last status %+v\nreconciler log:\n%s", want, st, tail(logs.String(), 60))
		return nil
	}
	st := waitPhases(map[string]status.PhaseState{"cluster": status.PhaseSucceeded, "control-plane": status.PhasePending})
	if len(st.ApprovedBy) == 0 || st.ApprovedBy[0].Phase != "cluster" || st.ApprovedBy[0].By != "Ferry Test Seed" && st.ApprovedBy[0].By == "" {
		t.Errorf("approvedBy = %+v", st.ApprovedBy)
	}
	var cl clusterv1.Cluster
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "capi-quickstart"}, &cl); err != nil || cl.Spec.Paused {
		t.Fatalf("Cluster after phase cluster: paused=%t, %v", cl.Spec.Paused, err)
	}

	// The next pull request raises approve to workers: the rest runs.
	work := t.TempDir()
	repo, err := git.PlainCloneContext(ctx, work, false, &git.CloneOptions{URL: g.URL})
	if err != nil {
		t.Fatal(err)
	}
	write(work, "plans/capi-quickstart.yaml", plan("workers"))
	wt, _ := repo.Worktree()
	if _, err := wt.Add("plans/capi-quickstart.yaml"); err != nil {
		t.Fatal(err)
	}
	if _, err := wt.Commit("Approve control-plane and workers", &git.CommitOptions{
		Author: &object.Signature{Name: "Alice Approver", Email: "alice@ferry.invalid", When: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	if err := repo.PushContext(ctx, &git.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	st = waitPhases(map[string]status.PhaseState{"cluster": status.PhaseSucceeded, "control-plane": status.PhaseSucceeded, "workers": status.PhaseSucceeded})
	found := false
	for _, a := range st.ApprovedBy {
		found = found || (a.Phase == "workers" && a.By == "Alice Approver")
	}
	if !found {
		t.Errorf("approvedBy = %+v; want workers approved by Alice Approver", st.ApprovedBy)
	}
	var mds clusterv1.MachineDeploymentList
	if err := mgmt.Client.List(ctx, &mds, client.InNamespace("default")); err != nil || len(mds.Items) != 1 || mds.Items[0].Spec.Paused {
		t.Errorf("MachineDeployments after workers: %d, %v", len(mds.Items), err)
	}
}
