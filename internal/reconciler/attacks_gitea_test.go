package reconciler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/planfile"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// ccmManifest is the manifest the example plan names.
const ccmManifest = "manifests/openstack-cloud-controller-manager.yaml"

// TestApprovalAttacksOnGitea acts out, on a real Gitea, what a writer
// without review can do to the plans repository's main branch, and checks
// after each that a reconciler started afresh (a restart: nothing in
// memory) publishes no step, and says why where the team looks: the
// plan's status and a failed ferry/approval commit status on the commit.
// Between attacks, a merged pull request shows that a reviewed change
// still runs.
//
//   - a push to main that changes a manifest the approved plan names;
//   - a pull request merged into a scratch branch whose merge commit is
//     then pushed to main (the review was of a change to scratch);
//   - a pushed spec.approve followed by a reviewed change to the same file
//     (the pull request's diff does not show the approval), read by a
//     reconciler whose status, edited on ferry/status, says the phase was
//     acted on already;
//   - a force-push of main back to an older merge, whose approval was
//     reviewed but which a later merge superseded: every plan waits until
//     the new head is acknowledged in the management cluster.
func TestApprovalAttacksOnGitea(t *testing.T) {
	ctx := t.Context()
	g := testenv.StartGitea(t, testenv.SeedDir(t, map[string]string{
		quickstart:  testenv.ExamplePlan(t, ""),
		ccmManifest: testenv.CCMManifest,
	}))
	writer := testenv.GiteaMaintainer
	fg, src := asFerry(t, g)
	clock := time.Now()
	// What the management cluster keeps across the restarts.
	hist := &memHistory{}
	// cycle runs one cycle of a reconciler started afresh, with record
	// restored from the status branch, and returns the head it planned,
	// the phases of the steps it published and its result for the plan.
	var policy Policy
	cycle := func(t *testing.T, record observed.Record) (string, []string, *planner.Result) {
		t.Helper()
		pub, rec := &recordingPublisher{}, &recorder{}
		approvals := &GitApprovals{Source: src, Forge: fg, MergeGrace: time.Second, Policy: policy,
			Now: func() time.Time { clock = clock.Add(time.Minute); return clock }}
		l := &Loop{Source: GitSource{Source: src}, Observer: &fixedObserver{snap: observed.Snapshot{Secrets: adoptSecrets()}},
			Publisher: pub, Recorder: rec, Verifier: approvals, History: hist}
		if record.Approved != "" {
			l.Restore("capi-quickstart", record)
		}
		// The first look at an unmerged commit starts its merge grace;
		// the second, a minute later on approvals' clock, refuses it.
		for range 2 {
			if err := l.Cycle(ctx); err != nil {
				t.Fatal(err)
			}
		}
		rev, _, err := src.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var phases []string
		for _, ev := range pub.steps {
			phases = append(phases, ev.Step.Phase)
		}
		return string(rev), phases, rec.planned["capi-quickstart"]
	}
	refusedOn := func(t *testing.T, sha string) {
		t.Helper()
		for _, s := range g.Statuses(t, sha) {
			if s.Context == ApprovalContext && s.Status == forge.StateFailure {
				return
			}
		}
		t.Errorf("no failed %s commit status on %s: %+v", ApprovalContext, short(sha), g.Statuses(t, sha))
	}
	merge := func(t *testing.T, branch string, files map[string]string, reviewers ...string) string {
		t.Helper()
		g.PushBranch(t, writer, branch, "Change "+branch, files)
		pr := g.OpenPullRequest(t, writer, branch, "Change "+branch)
		for _, r := range reviewers {
			g.Review(t, r, pr, "APPROVED")
		}
		return g.MergePullRequest(t, testenv.GiteaReviewer, pr, testenv.MergeCommit)
	}
	// gateOn previews the open pull requests against main's head, as the
	// reconciler does before a merge, and returns the merge gate's state
	// and description on head.
	gateOn := func(t *testing.T, head string) string {
		t.Helper()
		rev, _, err := src.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		loaded, err := src.FS(rev)
		if err != nil {
			t.Fatal(err)
		}
		base, err := planfile.LoadFS(loaded, "plans")
		if err != nil {
			t.Fatal(err)
		}
		previews := &Previews{Forge: fg, Pulls: GitSource{Source: src}, Observer: &fixedObserver{snap: observed.Snapshot{Secrets: adoptSecrets()}},
			Branch: "main", Path: "plans", Policy: policy}
		if err := previews.Update(ctx, Base{Revision: string(rev), Files: base}, func(string) observed.Record { return observed.Record{} }); err != nil {
			t.Fatal(err)
		}
		gate := ""
		for _, s := range g.Statuses(t, head) {
			if s.Context == GateContext {
				gate = s.Status + ": " + s.Description
			}
		}
		return gate
	}
	runs := func(t *testing.T, why string) {
		t.Helper()
		if _, phases, res := cycle(t, observed.Record{}); len(phases) == 0 || res == nil || res.Stopped != "" {
			t.Fatalf("%s: steps of phases %v published, result %+v; want the approved phase's steps", why, phases, res)
		}
	}

	merge(t, "approve-cluster", map[string]string{quickstart: testenv.ExamplePlan(t, "cluster")})
	runs(t, "phase cluster approved by a merged pull request")

	t.Run("a push changes a manifest the approved plan names", func(t *testing.T) {
		pushed := g.PushBranch(t, writer, "main", "Edit the CCM manifest", map[string]string{ccmManifest: testenv.CCMManifest + "# unreviewed\n"})
		rev, phases, res := cycle(t, observed.Record{})
		if rev != pushed || len(phases) != 0 || res == nil || !strings.Contains(res.Stopped, "without a pull request") || !strings.Contains(res.Stopped, ccmManifest) {
			t.Fatalf("at %s: steps of phases %v published, result %+v; want none, stopped for %s changed without a pull request", short(rev), phases, res, ccmManifest)
		}
		if ph := res.Phase("cluster"); ph == nil || ph.State != planner.Blocked {
			t.Errorf("phase cluster: %+v; want Blocked", ph)
		}
		refusedOn(t, pushed)
	})
	reviewed := merge(t, "review-ccm", map[string]string{ccmManifest: testenv.CCMManifest + "# reviewed\n"})
	runs(t, "the manifest's change merged through a pull request")
	t.Run("the approval record names the content approved", func(t *testing.T) {
		ga := &GitApprovals{Source: src, Forge: fg}
		if v, err := ga.VerifyContent(ctx, reviewed, quickstart, []string{quickstart, ccmManifest}); err != nil || !v.OK {
			t.Fatalf("VerifyContent at %s = %+v, %v", short(reviewed), v, err)
		}
		a, err := ga.Find(ctx, reviewed, quickstart, "cluster")
		if err != nil {
			t.Fatal(err)
		}
		// The SHA-256 of the Git object IDs of the plan and its manifest.
		sum := sha256.New()
		for _, content := range []string{testenv.ExamplePlan(t, "cluster"), testenv.CCMManifest + "# reviewed\n"} {
			id := plumbing.ComputeHash(plumbing.BlobObject, []byte(content))
			sum.Write(id[:])
		}
		if want := hex.EncodeToString(sum.Sum(nil)); a.Content != want || a.PR == 0 || a.By != testenv.GiteaReviewer {
			t.Errorf("approval of cluster = %+v; want content %s, merged by %s in a pull request", a, want, testenv.GiteaReviewer)
		}
	})

	t.Run("a merge into another branch, pushed to main", func(t *testing.T) {
		g.PushBranch(t, writer, "scratch", "Start scratch", map[string]string{"notes.md": "scratch\n"})
		g.PushBranch(t, writer, "approve-cp", "Approve control-plane", map[string]string{quickstart: testenv.ExamplePlan(t, "control-plane")})
		pr := g.OpenPullRequestInto(t, writer, "approve-cp", "scratch", "Approve control-plane")
		scratch := g.MergePullRequest(t, testenv.GiteaReviewer, pr, testenv.MergeCommit)
		g.PushCommit(t, writer, scratch, "main", false)
		rev, phases, res := cycle(t, observed.Record{})
		if rev != scratch || len(phases) != 0 || res == nil || !strings.Contains(res.Stopped, "without a pull request into main") {
			t.Fatalf("at %s: steps of phases %v published, result %+v; want none, stopped: no pull request into main", short(rev), phases, res)
		}
		refusedOn(t, scratch)
	})
	backToCluster := merge(t, "back-to-cluster", map[string]string{quickstart: testenv.ExamplePlan(t, "cluster")})
	runs(t, "spec.approve set back to cluster through a pull request")

	t.Run("a pushed approval, then a reviewed change, and an edited status", func(t *testing.T) {
		pushed := g.PushBranch(t, writer, "main", "Approve workers", map[string]string{quickstart: testenv.ExamplePlan(t, "workers")})
		merge(t, "comment", map[string]string{quickstart: testenv.ExamplePlan(t, "workers") + "# reviewed: a comment\n"})
		// ferry/status says workers was acted on: read back after a
		// restart, it must not stand for a verified approval.
		rev, phases, res := cycle(t, observed.Record{Approved: "workers"})
		if res == nil || slices.Contains(phases, "control-plane") || slices.Contains(phases, "workers") {
			t.Fatalf("at %s: steps of phases %v published, result %+v; want none of control-plane or workers", short(rev), phases, res)
		}
		ph := res.Phase("workers")
		if ph == nil || !strings.Contains(ph.Reason, "pushed without a pull request") || res.Approve != "workers" {
			t.Errorf("at %s: phase workers %+v; want it refused: approved by a push", short(rev), ph)
		}
		if cp := res.Phase("control-plane"); cp == nil || !strings.Contains(cp.Reason, "pushed without a pull request") {
			t.Errorf("phase control-plane %+v: want it refused too (the push raised it past cluster)", cp)
		}
		refusedOn(t, pushed)
	})
	merge(t, "lower", map[string]string{quickstart: testenv.ExamplePlan(t, "cluster") + "# lowered back to cluster\n"})
	runs(t, "spec.approve lowered back to cluster through a pull request")

	t.Run("a force-push back to an older merge", func(t *testing.T) {
		older := hist.mark.ActedOn
		g.PushCommit(t, writer, backToCluster, "main", true)
		rev, phases, res := cycle(t, observed.Record{})
		if rev != backToCluster || len(phases) != 0 || res == nil || !strings.Contains(res.Stopped, "history rewritten") {
			t.Fatalf("at %s: steps of phases %v published, result %+v; want none, stopped: history rewritten", short(rev), phases, res)
		}
		if hist.mark.ActedOn != older {
			t.Errorf("the revision acted on moved to %s; want it kept at %s", short(hist.mark.ActedOn), short(older))
		}
		hist.mark.Acknowledged = backToCluster
		runs(t, "the rewritten head acknowledged")
		if hist.mark.ActedOn != backToCluster {
			t.Errorf("after the acknowledged head ran, the revision acted on is %s; want %s", short(hist.mark.ActedOn), short(backToCluster))
		}
	})

	t.Run("a review policy of two approvals for control-plane", func(t *testing.T) {
		policy = Policy{Reviews: ReviewPolicy{"control-plane": 2}}
		defer func() { policy = Policy{} }()
		// Approved by bob alone: the merge gate fails, saying why, before
		// the merge.
		head := g.PushBranch(t, writer, "one-review", "Approve control-plane", map[string]string{quickstart: testenv.ExamplePlan(t, "control-plane")})
		n := g.OpenPullRequest(t, writer, "one-review", "Approve control-plane")
		g.Review(t, testenv.GiteaReviewer, n, "APPROVED")
		if gate := gateOn(t, head); !strings.HasPrefix(gate, "failure") || !strings.Contains(gate, "needs 2 approving reviews") {
			t.Errorf("%s on #%d's head: %q; want a failure: 1 of 2 reviews", GateContext, n, gate)
		}
		// Merged anyway (no branch protection here): not acted on.
		one := g.MergePullRequest(t, testenv.GiteaReviewer, n, testenv.MergeCommit)
		rev, phases, res := cycle(t, observed.Record{})
		ph := res.Phase("control-plane")
		if rev != one || slices.Contains(phases, "control-plane") || ph == nil || !strings.Contains(ph.Reason, "needs 2 approving reviews") || !strings.Contains(ph.Reason, "it has 1 ("+testenv.GiteaReviewer+")") {
			t.Errorf("at %s: steps of phases %v, phase control-plane %+v; want it refused: 1 of 2 reviews", short(rev), phases, ph)
		}
		refusedOn(t, one)
	})

	t.Run("a rollback merged before a later forward approval", func(t *testing.T) {
		// spec.approve may not be after spec.rollback.to (planfile's
		// validation): raised, it stays at most control-plane.
		rollback := func(approve string) string {
			return strings.Replace(testenv.ExamplePlan(t, approve), "spec:\n", "spec:\n  rollback: {to: control-plane}\n", 1)
		}
		merge(t, "roll-back", map[string]string{quickstart: rollback("cluster")})
		if _, _, res := cycle(t, observed.Record{}); res == nil || strings.Contains(res.Stopped, "roll back") {
			t.Fatalf("the rollback merged last: result %+v; want it acted on", res)
		}
		// Merged in order: the rollback, then a raise of spec.approve
		// that kept it; lowering spec.approve again is no new forward
		// approval, and the rollback still predates the raise.
		forward := merge(t, "forward-again", map[string]string{quickstart: rollback("control-plane")})
		for _, why := range []string{"raised after the rollback", "lowered again"} {
			if why == "lowered again" {
				merge(t, "lower-again", map[string]string{quickstart: rollback("cluster")})
			}
			rev, phases, res := cycle(t, observed.Record{})
			if len(phases) != 0 || res == nil || !strings.Contains(res.Stopped, "does not roll back over a later forward approval") || !strings.Contains(res.Stopped, short(forward)) {
				t.Errorf("%s, at %s: steps of phases %v, result %+v; want none, stopped: the rollback predates %s's approval", why, short(rev), phases, res, short(forward))
			}
		}
		refusedOn(t, forward)
	})

	t.Run("owners by path: alice owns the plan", func(t *testing.T) {
		owners, err := ParseOwners("owners", []byte("plans/** "+writer+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		policy = Policy{Owners: owners}
		defer func() { policy = Policy{} }()
		// approve opens author's pull request setting spec.approve to
		// phase (which takes the rollback back), approved by reviewer.
		approve := func(t *testing.T, author, reviewer, phase string) (string, int) {
			t.Helper()
			branch := "owners-" + phase
			head := g.PushBranch(t, author, branch, "Approve "+phase, map[string]string{quickstart: testenv.ExamplePlan(t, phase)})
			n := g.OpenPullRequest(t, author, branch, "Approve "+phase)
			g.Review(t, reviewer, n, "APPROVED")
			return head, n
		}
		notActedOn := func(t *testing.T, merged, phase string) {
			t.Helper()
			rev, phases, res := cycle(t, observed.Record{})
			// The change itself (the content) is refused first, which
			// stops the plan; the approval too, were the content an
			// owner's.
			why := res.Stopped
			if ph := res.Phase(phase); why == "" && ph != nil {
				why = ph.Reason
			}
			want := "has approving reviews by " + testenv.GiteaReviewer + " only"
			if rev != merged || len(phases) != 0 || !strings.Contains(why, quickstart+" is owned by "+writer+" (--owners-file)") || !strings.Contains(why, want) {
				t.Errorf("at %s: steps of phases %v, result %+v; want none, refused: owned by %s, %s", short(rev), phases, res, writer, want)
			}
			refusedOn(t, merged)
		}
		// alice's own pull request, approved by bob, who may write but
		// owns nothing: the gate fails before the merge, and after it
		// nothing of the plan runs.
		head, n := approve(t, writer, testenv.GiteaReviewer, "cluster")
		if gate := gateOn(t, head); !strings.HasPrefix(gate, "failure") || !strings.Contains(gate, quickstart+" is owned by "+writer+" (--owners-file)") {
			t.Errorf("%s on #%d's head: %q; want a failure: %s's owner did not approve", GateContext, n, gate, quickstart)
		}
		notActedOn(t, g.MergePullRequest(t, testenv.GiteaReviewer, n, testenv.MergeCommit), "cluster")
		// Again, raising it to control-plane: nor does the plan fall back
		// to cluster, whose approval had no owner's review either.
		_, n = approve(t, writer, testenv.GiteaReviewer, "control-plane")
		notActedOn(t, g.MergePullRequest(t, testenv.GiteaReviewer, n, testenv.MergeCommit), "control-plane")
		// bob's pull request, approved by alice: passes and runs.
		head, n = approve(t, testenv.GiteaReviewer, writer, "workers")
		if gate := gateOn(t, head); !strings.HasPrefix(gate, "success") {
			t.Errorf("%s on #%d's head: %q; want success: the owner approved", GateContext, n, gate)
		}
		g.MergePullRequest(t, testenv.GiteaReviewer, n, testenv.MergeCommit)
		runs(t, "workers approved by the plan's owner")
		// A change that approves nothing is the owner's to approve too.
		g.PushBranch(t, writer, "owners-comment", "Explain the plan", map[string]string{quickstart: testenv.ExamplePlan(t, "workers") + "# a note\n"})
		n = g.OpenPullRequest(t, writer, "owners-comment", "Explain the plan")
		g.Review(t, testenv.GiteaReviewer, n, "APPROVED")
		notActedOn(t, g.MergePullRequest(t, testenv.GiteaReviewer, n, testenv.MergeCommit), "workers")
	})
}

// memHistory is a HistoryStore in memory, which outlives the loops of a
// test as the management cluster's ConfigMap outlives reconcilers.
type memHistory struct{ mark HistoryMark }

func (m *memHistory) Load(context.Context) (HistoryMark, error) { return m.mark, nil }
func (m *memHistory) Save(_ context.Context, mark HistoryMark) error {
	m.mark = mark
	return nil
}

// asFerry is what ferry reads g through: the forge's API and the plans
// repository, both as ferry's account (its token in a file, as mounted).
func asFerry(t *testing.T, g *testenv.Gitea) (*forge.Gitea, *gitsource.Source) {
	t.Helper()
	bot := testenv.GiteaBot
	fg, err := forge.NewGitea(g.Owner, g.Repo, g.Token(bot), g.URL)
	if err != nil {
		t.Fatal(err)
	}
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte(g.Token(bot)), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := gitsource.New(gitsource.Config{URL: g.RepoURL(), CacheDir: t.TempDir(), Auth: gitsource.Auth{Username: bot, TokenFile: token}})
	if err != nil {
		t.Fatal(err)
	}
	return fg, src
}
