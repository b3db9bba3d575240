package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"

	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/reconciler"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/status/statusfile"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// refuseSecret makes mgmt refuse to create the Secret name (in any
// namespace), as an outage of the admission chain would, and returns what
// ends the outage.
func refuseSecret(t *testing.T, mgmt *testenv.Kube, name string) func() {
	t.Helper()
	return refuseSecretCreate(t, mgmt, "outage", admissionregistrationv1.Validation{
		Expression: "object.metadata.name != '" + name + "'", Message: "an outage: this Secret cannot be written now"})
}

// refuseSecretCreate makes mgmt refuse to create the Secrets that fail
// check, with an admission policy and binding called policy, and returns
// what ends the refusal.
func refuseSecretCreate(t *testing.T, mgmt *testenv.Kube, name string, check admissionregistrationv1.Validation) func() {
	t.Helper()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{check},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	mustCreate(t, mgmt, policy)
	mustCreate(t, mgmt, binding)
	return func() {
		if err := mgmt.Client.Delete(context.Background(), binding); err != nil {
			t.Fatalf("end the refusal of %s: %v", name, err)
		}
		time.Sleep(2 * time.Second) // the API server's policy informer
	}
}

// startRunOnGitea starts a Gitea whose plans repository holds files, and
// `reconciler run --forge gitea` on it (startRunWith, with extra flags
// last) as Gitea's bot account, with Gitea's webhook delivered to it; it
// returns them and a reader of the status branch.
func startRunOnGitea(t *testing.T, ctx context.Context, mgmt *testenv.Kube, namespaces []string, files map[string]string, extra ...string) (*testenv.Gitea, *running, reconciler.GitStatusStore) {
	t.Helper()
	gt, git, reader := giteaForRun(t, files)
	r := startRunWith(t, ctx, mgmt, namespaces, gt.Token(testenv.GiteaBot), slices.Concat(git, giteaForgeFlags(gt), extra)...)
	gt.AddWebhook(t, r.webhookURL, string(r.webhookSecret))
	return gt, r, reader
}

// giteaForRun starts Gitea with files in its plans repository and returns
// the Git flags of ferry's processes (as the bot) and a reader of the
// status branch.
func giteaForRun(t *testing.T, files map[string]string) (gt *testenv.Gitea, git []string, reader reconciler.GitStatusStore) {
	t.Helper()
	return giteaForRunOn(t, files, "127.0.0.1")
}

// giteaForRunOn is giteaForRun with Gitea listening on ip.
func giteaForRunOn(t *testing.T, files map[string]string, ip string) (gt *testenv.Gitea, git []string, reader reconciler.GitStatusStore) {
	t.Helper()
	gt = testenv.StartGiteaOn(t, testenv.SeedDir(t, files), ip)
	bot := testenv.GiteaBot
	gitToken := filepath.Join(t.TempDir(), "git-token")
	if err := os.WriteFile(gitToken, []byte(gt.Token(bot)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	git = []string{"--repo", gt.RepoURL(), "--git-username", bot, "--git-token-file", gitToken}
	reader = reconciler.GitStatusStore{Git: &gitsource.Branch{URL: gt.RepoURL(), Name: statusfile.DefaultBranch, Auth: gitsource.Auth{Username: bot, TokenFile: gitToken}}}
	return gt, git, reader
}

// giteaForgeFlags are `reconciler run`'s flags for gt as its forge.
func giteaForgeFlags(gt *testenv.Gitea) []string {
	return []string{"--forge", "gitea", "--forge-url", gt.URL, "--forge-repo", gt.Owner + "/" + gt.Repo}
}

// TestRunOnGitea: `reconciler run --forge gitea` against a real Gitea.
// The merge gate fails on an invalid plan and succeeds once a push fixes
// it; a second pull request raising the same plan fails both until it is
// closed; a merge approves the phase, credited to the merger; a push to
// main that raises spec.approve runs nothing, and the status, the phase
// and a commit status on that commit say why. A step that failed for good
// during an outage (an admission policy that refuses the cloud
// credentials' Secret) is retried by `/ferry retry` on the pull request
// that approved its phase, once the outage is over; the same command from
// a reader is refused; each command is answered and carried out once,
// across a restart of the reconciler too. The Cluster's Events show the
// phase's transitions: running, failed with the step that failed, and
// running again (counted, across the restart).
func TestRunOnGitea(t *testing.T) {
	mgmt := orphanedQuickstart(t)
	// The Cluster object is back (restored from the old management
	// cluster, not yet wired to OpenStack): ferry writes its Events on it.
	mustCreate(t, mgmt, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "capi-quickstart"}})
	outage := refuseSecret(t, mgmt, "capi-quickstart-cloud-config")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	plan := func(approve string) string { return testenv.ExamplePlan(t, approve) }
	gt, r, reader := startRunOnGitea(t, ctx, mgmt, []string{"capi-backup"}, map[string]string{
		"plans/capi-quickstart.yaml":                        plan(""),
		"manifests/openstack-cloud-controller-manager.yaml": testenv.CCMManifest,
	}, "--interval", "2s", "--no-cloud", "--kinds", "kube,workload", "--comment-interval", "50ms")
	bot := testenv.GiteaBot
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

	// The merge approves cluster: it runs, credited to the merger, and
	// fails for good on the Secret the outage refuses.
	merge := gt.MergePullRequest(t, alice, first, testenv.MergeCommit)
	const cloudConfig = "cluster/copy-secret/secret/capi-quickstart-cloud-config"
	stepState := func(key string) status.StepState {
		st := readStatus()
		if st == nil || st.Revision != merge {
			return ""
		}
		for _, s := range st.Phase("cluster").Steps {
			if s.Key == key {
				return s.State
			}
		}
		return ""
	}
	r.waitFor("phase cluster to fail on the refused Secret", func() bool {
		st := readStatus()
		return stepState(cloudConfig) == status.StepFailed && st.Phase("cluster").State == status.PhaseFailed
	})
	if st := readStatus(); len(st.ApprovedBy) != 1 || !approvedAs(st.ApprovedBy[0], status.Approval{Phase: "cluster", By: alice, PR: first, Commit: merge}) {
		t.Errorf("approvedBy = %+v; want cluster by %s in #%d at %s, with the content's digest", st.ApprovedBy, alice, first, merge)
	}

	// A reader's retry is refused; after the outage, alice's runs the
	// step to success, published once although the webhook and the poll
	// both bring the command.
	answer := func(id int64) string {
		for _, c := range gt.Comments(t, first) {
			if strings.HasPrefix(c.Body, forge.Marker("command/"+strconv.FormatInt(id, 10))) {
				return c.Body
			}
		}
		return ""
	}
	byMallory := gt.Comment(t, testenv.GiteaReader, first, "/ferry retry")
	r.waitFor("the reader's retry refused", func() bool { return strings.Contains(answer(byMallory), "refused: commands need write access") })
	if stepState(cloudConfig) != status.StepFailed {
		t.Errorf("the refused retry ran the step: %s", stepState(cloudConfig))
	}
	// A restart forgets what it answered in memory: the answer's marker
	// on the pull request keeps the refusal from being answered again
	// (counted below), and the failed step stays failed (its result is
	// replayed from the bus).
	r.restart()
	outage()
	published := strings.Count(r.log(), "step="+cloudConfig+" executor")
	byAlice := gt.Comment(t, alice, first, "/ferry retry")
	r.waitFor("the retried step to succeed", func() bool { return stepState(cloudConfig) == status.StepSucceeded })
	if a := answer(byAlice); !strings.Contains(a, "retrying 1 failed step(s) of phase cluster of plan capi-quickstart") {
		t.Errorf("answer to alice's retry: %q", a)
	}
	time.Sleep(3 * time.Second) // a second delivery or poll would publish now
	if n := strings.Count(r.log(), "step="+cloudConfig+" executor") - published; n != 1 {
		t.Errorf("the retried step was published %d times; want once", n)
	}
	answers := 0
	for _, c := range gt.Comments(t, first) {
		if strings.Contains(c.Body, "<!-- ferry:command/") {
			answers++
		}
	}
	if answers != 2 {
		t.Errorf("%d answers on #%d; want one per command", answers, first)
	}

	// The Cluster's Events tell the same story: the phase ran, a step
	// failed for good and failed the phase, and the retry ran the phase
	// again, counted on the first PhaseRunning although the restart
	// between wrote it from a new process; the restart itself reported
	// nothing again.
	running := fmt.Sprintf("Phase cluster is running (approved by %s in #%d)", alice, first)
	var events map[string]string
	r.waitFor("the Cluster's events", func() bool {
		events = clusterEvents(t, ctx, mgmt, "default/capi-quickstart")
		return strings.HasPrefix(events["PhaseRunning"], "Normal x2: ")
	})
	for reason, want := range map[string]string{
		"PhaseRunning": "Normal x2: " + running,
		"StepFailed":   "Warning x1: Step kube: copy-secret Secret default/capi-quickstart-cloud-config of phase cluster failed: ",
		"PhaseFailed":  fmt.Sprintf("Warning x1: Phase cluster failed (approved by %s in #%d): step %s failed: ", alice, first, cloudConfig),
	} {
		if !strings.HasPrefix(events[reason], want) {
			t.Errorf("%s event: %q; want it to start %q", reason, events[reason], want)
		}
	}
	if !strings.Contains(events["StepFailed"], "an outage: this Secret cannot be written now") {
		t.Errorf("StepFailed event does not say why: %q", events["StepFailed"])
	}
	delete(events, "PhaseApproved") // the merge may be seen before its steps are published
	if len(events) != 3 {
		t.Errorf("events on the Cluster: %q; want PhaseRunning, StepFailed and PhaseFailed only", events)
	}

	// A push to main that raises spec.approve: not acted on, and said.
	push := gt.PushBranch(t, alice, "main", "Approve control-plane without review", map[string]string{
		"plans/capi-quickstart.yaml": plan("control-plane")})
	// First the forge is asked again for a while (it records a merge
	// after it moves the branch), then the change is refused: it changed
	// the plan file without a pull request, so the whole plan stops.
	r.waitFor("the pushed change waiting for the forge", func() bool {
		st := readStatus()
		return st != nil && st.Revision == push && statusSays(st, "has not said yet which pull request merged commit")
	})
	var last *status.PlanStatus
	t.Cleanup(func() {
		if t.Failed() && last != nil {
			t.Logf("the last status read: revision %s, stopped %q, phases %+v", last.Revision, last.Stopped, last.Phases)
		}
	})
	r.waitFor("the pushed change refused in the status", func() bool {
		st := readStatus()
		last = st
		return st != nil && st.Revision == push && strings.Contains(st.Stopped, "changed plans/capi-quickstart.yaml") && strings.Contains(st.Stopped, "without a pull request")
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
	if log := r.log(); !strings.Contains(log, "not acted on: it was not merged through a pull request") || strings.Contains(log, gt.Token(bot)) || strings.Contains(log, fakePassword) {
		t.Errorf("the log does not say the approval was refused, or holds a secret:\n%s", tail(log, 20))
	}
}

// statusSays reports whether the status's Stopped or a phase's reason
// holds part.
func statusSays(st *status.PlanStatus, part string) bool {
	if strings.Contains(st.Stopped, part) {
		return true
	}
	for _, ph := range st.Phases {
		if strings.Contains(ph.Reason, part) {
			return true
		}
	}
	return false
}
