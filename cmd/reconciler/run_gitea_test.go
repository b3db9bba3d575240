package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/reconciler"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testenv"
)

// TestRunOnGitea: `reconciler run --forge gitea` against a real Gitea.
// The merge gate fails on an invalid plan and succeeds once a push fixes
// it; a second pull request raising the same plan fails both until it is
// closed; a merge approves the phase, credited to the merger; a push to
// main that raises spec.approve runs nothing, and the status, the phase
// and a commit status on that commit say why.
func TestRunOnGitea(t *testing.T) {
	mgmt := orphanedQuickstart(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	plan := func(approve string) string { return testenv.ExamplePlan(t, approve) }
	gt := testenv.StartGitea(t, testenv.SeedDir(t, map[string]string{
		"plans/capi-quickstart.yaml":                        plan(""),
		"manifests/openstack-cloud-controller-manager.yaml": testenv.CCMManifest,
	}))
	bot := testenv.GiteaBot
	gitToken := filepath.Join(t.TempDir(), "git-token")
	if err := os.WriteFile(gitToken, []byte(gt.Token(bot)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startRunWith(t, ctx, mgmt, []string{"capi-backup"}, gt.Token(bot),
		"--repo", gt.RepoURL(), "--git-username", bot, "--git-token-file", gitToken,
		"--forge", "gitea", "--forge-url", gt.URL, "--forge-repo", gt.Owner+"/"+gt.Repo,
		"--interval", "2s", "--no-cloud", "--kinds", "kube,workload", "--comment-interval", "50ms")
	gt.AddWebhook(t, r.webhookURL, string(r.webhookSecret))
	reader := status.Store{Git: &gitsource.Writer{URL: gt.RepoURL(), Branch: status.DefaultBranch, Auth: gitsource.Auth{Username: bot, TokenFile: gitToken}}}
	readStatus := func() *status.PlanStatus {
		st, err := reader.Read(ctx, "capi-quickstart")
		if err != nil {
			return nil
		}
		return st
	}
	statusOf := func(sha, statusContext string) string {
		for _, s := range gt.Statuses(t, sha) {
			if s.Context == statusContext {
				return s.Status + ": " + s.Description
			}
		}
		return ""
	}
	gateIs := func(sha, prefix, part string) func() bool {
		return func() bool {
			g := statusOf(sha, reconciler.GateContext)
			return strings.HasPrefix(g, prefix) && strings.Contains(g, part)
		}
	}
	alice := testenv.GiteaMaintainer

	// An invalid plan fails the gate; the push that fixes it passes.
	broken := strings.Replace(plan("cluster"), "replicas: 2", "replicas: -2", 1)
	head := gt.PushBranch(t, alice, "approve-cluster", "Approve cluster", map[string]string{"plans/capi-quickstart.yaml": broken})
	first := gt.OpenPullRequest(t, alice, "approve-cluster", "Approve cluster")
	r.waitFor("ferry/preview failing on the invalid plan", gateIs(head, "failure: ", "plans/capi-quickstart.yaml is invalid"))
	head = gt.PushBranch(t, alice, "approve-cluster", "Fix the replicas", map[string]string{"plans/capi-quickstart.yaml": plan("cluster")})
	r.waitFor("ferry/preview passing once fixed", gateIs(head, "success: ", ""))

	// A second pull request raising the same plan fails both.
	other := gt.PushBranch(t, alice, "approve-cluster-too", "Approve cluster as well", map[string]string{
		"plans/capi-quickstart.yaml": "# Approved twice.\n" + plan("cluster")})
	second := gt.OpenPullRequest(t, alice, "approve-cluster-too", "Approve cluster as well")
	r.waitFor("ferry/preview failing on both pull requests", func() bool {
		return gateIs(other, "failure: ", "merge one at a time")() && gateIs(head, "failure: ", "merge one at a time")()
	})
	gt.API(t, alice, "PATCH", "/repos/"+gt.Owner+"/"+gt.Repo+"/pulls/"+strconv.Itoa(second), map[string]any{"state": "closed"}, nil)
	r.waitFor("ferry/preview passing again once the other is closed", gateIs(head, "success: ", ""))

	// The merge approves cluster: it runs, credited to the merger.
	merge := gt.MergePullRequest(t, alice, first, testenv.MergeCommit)
	r.waitFor("a copy-secret step of phase cluster to succeed", func() bool {
		st := readStatus()
		if st == nil || st.Revision != merge {
			return false
		}
		for _, s := range st.Phase("cluster").Steps {
			if s.Action == step.CopySecret && s.State == status.StepSucceeded {
				return true
			}
		}
		return false
	})
	if st := readStatus(); len(st.ApprovedBy) != 1 || st.ApprovedBy[0] != (status.Approval{Phase: "cluster", By: alice, PR: first, Commit: merge}) {
		t.Errorf("approvedBy = %+v; want cluster by %s in #%d at %s", st.ApprovedBy, alice, first, merge)
	}

	// A push to main that raises spec.approve: not acted on, and said.
	push := gt.PushBranch(t, alice, "main", "Approve control-plane without review", map[string]string{
		"plans/capi-quickstart.yaml": plan("control-plane")})
	r.waitFor("the pushed approval refused in the status", func() bool {
		st := readStatus()
		return st != nil && st.Revision == push && strings.Contains(st.Phase("control-plane").Reason, "pushed without a pull request")
	})
	st := readStatus()
	if len(st.ApprovedBy) != 1 {
		t.Errorf("approvedBy = %+v; the pushed approval must name no approver", st.ApprovedBy)
	}
	for _, s := range st.Phase("control-plane").Steps {
		if s.State != status.StepPending {
			t.Errorf("step %s of the refused phase is %s", s.Title(), s.State)
		}
	}
	r.waitFor("ferry/approval failing on the pushed commit", func() bool {
		return strings.HasPrefix(statusOf(push, reconciler.ApprovalContext), "failure: not acted on")
	})
	if log := r.log(); !strings.Contains(log, "approval not acted on") || strings.Contains(log, gt.Token(bot)) || strings.Contains(log, fakePassword) {
		t.Errorf("the log does not say the approval was refused, or holds a secret:\n%s", tail(log, 20))
	}
}
