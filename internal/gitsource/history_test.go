package gitsource_test

import (
	"errors"
	"io/fs"
	"slices"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/planfile"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

const planPath = "plans/capi-quickstart.yaml"

// approves returns a match for Introduced that decodes the plan, as the
// reconciler would, and compares spec.approve. It counts its calls.
func approves(t *testing.T, phase string, calls *int) func([]byte) bool {
	return func(b []byte) bool {
		*calls++
		f, err := planfile.Decode(planPath, b)
		if err != nil {
			t.Errorf("decode %s: %v", planPath, err)
			return false
		}
		return f.Plan.Spec.Approve == phase
	}
}

// TestIntroducedLinear walks a history in which approve goes "" ->
// cluster -> control-plane -> cluster -> control-plane, with unrelated
// commits in between.
func TestIntroducedLinear(t *testing.T) {
	g := testenv.StartGit(t, seedPlans(t))
	seed := serverHead(t, g.Dir)
	c := cloneRepo(t, g.URL)
	cluster := c.change(planPath, testenv.ExamplePlan(t, "cluster"), "Approve cluster")
	c.change("plans/README.md", "Plans.\n", "Add a README")
	firstCP := c.change(planPath, testenv.ExamplePlan(t, "control-plane"), "Approve control-plane")
	afterCP := c.change("plans/README.md", "Plans, more.\n", "Edit the README")
	back := c.change(planPath, testenv.ExamplePlan(t, "cluster"), "Back to cluster")
	againCP := c.change(planPath, testenv.ExamplePlan(t, "control-plane"), "Approve control-plane again")
	head := c.change("docs/notes.md", "Notes.\n", "Add notes")
	c.push()
	src := newSource(t, g.URL)
	if rev, _ := poll(t, src); rev != head {
		t.Fatalf("poll = %s; want %s", rev, head)
	}

	for _, tc := range []struct {
		name    string
		from    gitsource.Revision
		phase   string
		want    gitsource.Revision
		wantErr error
	}{
		{name: "latest raise", from: head, phase: "control-plane", want: againCP},
		{name: "first raise, unrelated commit after", from: afterCP, phase: "control-plane", want: firstCP},
		{name: "lowered", from: back, phase: "cluster", want: back},
		{name: "first approval", from: parentOf(t, src, firstCP), phase: "cluster", want: cluster},
		{name: "since the root commit", from: seed, phase: "", want: seed},
		{name: "no match at the start", from: head, phase: "workers", wantErr: gitsource.ErrNoMatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			got, err := src.Introduced(t.Context(), tc.from, planPath, approves(t, tc.phase, &calls))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("introduced = %s, %v; want %v", got.Hash, err, tc.wantErr)
				}
				return
			}
			if err != nil || got.Hash != tc.want {
				t.Fatalf("introduced = %s (%q), %v; want %s", got.Hash, got.Message, err, tc.want)
			}
		})
	}

	// Unrelated commits leave the file's blob as it was: it is decoded
	// once per content, not once per commit.
	calls := 0
	if _, err := src.Introduced(t.Context(), afterCP, planPath, approves(t, "control-plane", &calls)); err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Errorf("match called %d times; want 2 (control-plane, then cluster)", calls)
	}

	if _, err := src.Introduced(t.Context(), head, "plans/missing.yaml", func([]byte) bool { return true }); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("introduced of a missing file: %v; want fs.ErrNotExist", err)
	}
	// A file that did not exist before a commit was introduced by it.
	got, err := src.Introduced(t.Context(), head, "docs/notes.md", func([]byte) bool { return true })
	if err != nil || got.Hash != head {
		t.Errorf("introduced docs/notes.md = %s, %v; want %s", got.Hash, err, head)
	}
}

// parentOf returns the first parent of a commit the Source has fetched.
func parentOf(t *testing.T, src *gitsource.Source, r gitsource.Revision) gitsource.Revision {
	t.Helper()
	c, err := src.Commit(r)
	if err != nil || len(c.Parents) == 0 {
		t.Fatalf("parent of %s: %v", r, err)
	}
	return c.Parents[0]
}

// TestIntroducedMerge approves through a merged pull request: the first-
// parent walk returns the merge, not the pull request's own commit.
func TestIntroducedMerge(t *testing.T) {
	g := testenv.StartGit(t, seedPlans(t))
	c := cloneRepo(t, g.URL)
	cluster := c.change(planPath, testenv.ExamplePlan(t, "cluster"), "Approve cluster")

	c.checkout("approve-cp", true)
	feature := c.change(planPath, testenv.ExamplePlan(t, "control-plane"), "Approve control-plane")
	c.checkout("main", false)
	unrelated := c.change("plans/README.md", "Plans.\n", "Add a README")
	c.write(planPath, testenv.ExamplePlan(t, "control-plane"))
	merge := c.commit("Merge pull request #7 from x/y\n\nApprove control-plane\n", unrelated, feature)
	c.push()

	src := newSource(t, g.URL)
	if rev, _ := poll(t, src); rev != merge {
		t.Fatalf("poll = %s; want the merge %s", rev, merge)
	}
	calls := 0
	got, err := src.Introduced(t.Context(), merge, planPath, approves(t, "control-plane", &calls))
	if err != nil {
		t.Fatal(err)
	}
	if got.Hash != merge {
		t.Fatalf("introduced = %s (%q); want the merge %s", got.Hash, got.Message, merge)
	}
	if !got.IsMerge() || !slices.Equal(got.Parents, []gitsource.Revision{unrelated, feature}) {
		t.Errorf("merge parents %v; want [%s %s]", got.Parents, unrelated, feature)
	}
	if n, ok := got.PullRequest(); !ok || n != 7 {
		t.Errorf("pull request = %d, %v; want 7", n, ok)
	}
	wantTime := epoch.Add(4 * time.Minute)
	if got.Author.Name != "Dev Merge pull request #7 from x/y" || got.Author.Email != "dev@ferry.invalid" {
		t.Errorf("author %+v; want Dev Merge pull request #7 from x/y <dev@ferry.invalid>", got.Author)
	}
	if !got.Time().Equal(wantTime) || got.Committer.Email != "dev@ferry.invalid" {
		t.Errorf("committer %+v; want dev@ferry.invalid at %s", got.Committer, wantTime)
	}
	if gitsource.IsFerryCommit(got) {
		t.Error("a person's merge taken for ferry's commit")
	}

	// Cluster was approved by a plain commit on main, before the merge.
	got, err = src.Introduced(t.Context(), unrelated, planPath, approves(t, "cluster", &calls))
	if err != nil || got.Hash != cluster {
		t.Fatalf("introduced cluster = %s, %v; want %s", got.Hash, err, cluster)
	}
	if got.IsMerge() {
		t.Error("a plain commit taken for a merge")
	}
}

// TestIsFerryCommit covers both marks of ferry's status commits.
func TestIsFerryCommit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		email string
		msg   string
		want  bool
	}{
		{"ferry author", gitsource.FerryAuthorEmail, "Status of capi-quickstart", true},
		{"ferry author, other case", "Ferry@Ferry.Invalid", "Status", true},
		{"trailer", "bot@example.com", "Status of capi-quickstart\n\nPhase cluster succeeded.\n\nFerry-Status: true\n", true},
		{"trailer among others", "bot@example.com", "Status\n\nSigned-off-by: Bot <bot@example.com>\nferry-status: TRUE", true},
		{"trailer false", "bot@example.com", "Status\n\nFerry-Status: false\n", false},
		{"trailer in the subject", "dev@example.com", "Ferry-Status: true", false},
		{"trailer not in the last paragraph", "dev@example.com", "Fix\n\nFerry-Status: true\n\nMore words.\n", false},
		{"a person", "dev@example.com", "Approve cluster", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := gitsource.Commit{Author: gitsource.Signature{Email: tc.email}, Message: tc.msg}
			if got := gitsource.IsFerryCommit(c); got != tc.want {
				t.Errorf("IsFerryCommit = %v; want %v", got, tc.want)
			}
		})
	}
}

// TestPullRequest covers GitHub's merge and squash messages.
func TestPullRequest(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want int
		ok   bool
	}{
		{"Merge pull request #7 from x/y\n\nApprove control-plane", 7, true},
		{"Merge pull request #1234 from org/branch-name", 1234, true},
		{"Approve control-plane (#42)\n\n* raise approve", 42, true},
		{"Approve control-plane (#42) \r\n", 42, true},
		{"Merge branch 'main' into feature", 0, false},
		{"Fix #7 in the README", 0, false},
		{"", 0, false},
	} {
		n, ok := gitsource.Commit{Message: tc.msg}.PullRequest()
		if n != tc.want || ok != tc.ok {
			t.Errorf("PullRequest(%q) = %d, %v; want %d, %v", tc.msg, n, ok, tc.want, tc.ok)
		}
	}
}

// TestChanged: the commit that last changed any of a plan's files, along
// the first-parent history; an unrelated commit changes nothing, a change
// to a manifest the plan names does, a deleted file too, and an earlier
// answer passed back gives the same answer.
func TestChanged(t *testing.T) {
	g := testenv.StartGit(t, seedPlans(t))
	seed := serverHead(t, g.Dir)
	c := cloneRepo(t, g.URL)
	approve := c.change(planPath, testenv.ExamplePlan(t, "cluster"), "Approve cluster")
	manifest := c.change("manifests/ccm.yaml", "kind: ConfigMap\n", "Add the CCM manifest")
	unrelated := c.change("plans/README.md", "Plans.\n", "Add a README")
	edited := c.change("manifests/ccm.yaml", "kind: Secret\n", "Edit the CCM manifest")
	head := c.change("docs/notes.md", "Notes.\n", "Add notes")
	c.push()
	src := newSource(t, g.URL)
	if rev, _ := poll(t, src); rev != head {
		t.Fatalf("poll = %s; want %s", rev, head)
	}
	paths := []string{planPath, "manifests/ccm.yaml"}
	for _, tc := range []struct {
		name      string
		at        gitsource.Revision
		paths     []string
		want      gitsource.Revision
		wantSame  gitsource.Revision // a revision whose files are in the same state
		wantOther gitsource.Revision // one whose are not
	}{
		{name: "the plan alone", at: head, paths: paths[:1], want: approve, wantSame: unrelated, wantOther: seed},
		{name: "a manifest edited since", at: head, paths: paths, want: edited, wantSame: head, wantOther: unrelated},
		{name: "an unrelated commit after", at: unrelated, paths: paths, want: manifest},
		{name: "a file missing since the start", at: seed, paths: paths, want: seed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := src.Changed(t.Context(), tc.at, tc.paths, gitsource.Content{})
			if err != nil || got.Commit.Hash != tc.want {
				t.Fatalf("changed = %s (%q), %v; want %s", got.Commit.Hash, got.Commit.Message, err, tc.want)
			}
			// Passed back, the answer ends a later walk, and only when
			// nothing changed in between.
			again, err := src.Changed(t.Context(), tc.at, tc.paths, got)
			if err != nil || again.Commit.Hash != got.Commit.Hash || again.Digest != got.Digest || again.Rev != got.Rev {
				t.Errorf("changed again with the answer = %+v, %v; want %+v", again, err, got)
			}
			if tc.wantSame != "" {
				if same, err := src.Changed(t.Context(), tc.wantSame, tc.paths, gitsource.Content{}); err != nil || same.Digest != got.Digest {
					t.Errorf("digest at %s = %s, %v; want %s, the same files", tc.wantSame.Short(), same.Digest, err, got.Digest)
				}
			}
			if tc.wantOther != "" {
				if other, err := src.Changed(t.Context(), tc.wantOther, tc.paths, gitsource.Content{}); err != nil || other.Digest == got.Digest {
					t.Errorf("digest at %s = %s, %v; want another than %s", tc.wantOther.Short(), other.Digest, err, got.Digest)
				}
			}
		})
	}
	// A stale answer (the manifest changed after it) does not end the walk.
	before, err := src.Changed(t.Context(), unrelated, paths, gitsource.Content{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := src.Changed(t.Context(), head, paths, before); err != nil || got.Commit.Hash != edited {
		t.Errorf("changed at head after a stale answer = %s, %v; want %s", got.Commit.Hash, err, edited)
	}
	if _, err := src.Changed(t.Context(), head, []string{"../x"}, gitsource.Content{}); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("changed of an invalid path: %v; want fs.ErrInvalid", err)
	}
}
