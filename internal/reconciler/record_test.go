package reconciler

import (
	"context"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/status/statusfile"
	"github.com/ferry-dev/ferry/internal/testing/fakegithub"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestFlushMirrorsRestoredStatuses: a reconciler killed after it committed
// a status and before its comment and commit statuses reached GitHub (the
// forge client sends them in the background). The next process restores
// the status from the status branch, where nothing has changed since, and
// its first flush still brings the pull request's comment and the commit
// statuses up to the status.
func TestFlushMirrorsRestoredStatuses(t *testing.T) {
	ctx := context.Background()
	g := testenv.StartGit(t, testenv.SeedDir(t, map[string]string{"README.md": "plans\n"}))
	store := GitStatusStore{Git: &gitsource.Branch{URL: g.URL, Name: statusfile.DefaultBranch, CacheDir: t.TempDir()}}
	const merge = "0123456789abcdef0123456789abcdef01234567"
	st := &status.PlanStatus{Plan: "capi-quickstart", Revision: merge, Approve: "cluster",
		ApprovedBy: []status.Approval{{Phase: "cluster", By: "bob", PR: 1, Commit: merge}},
		Phases: []status.PhaseStatus{
			{Name: "cluster", State: status.PhaseSucceeded, Done: 11},
			{Name: "control-plane", State: status.PhasePending, Left: 11},
		}}
	// The killed process: committed, never mirrored.
	if _, err := store.Write(ctx, []*status.PlanStatus{st}); err != nil {
		t.Fatal(err)
	}
	head := g.Run(t, "rev-parse", statusfile.DefaultBranch)

	gh := fakegithub.New("ferry-dev", "plans", "token")
	t.Cleanup(gh.Close)
	gh.AddPR(fakegithub.PR{Number: 1, State: "closed", Title: "Approve cluster", Head: merge, Base: "main"})
	client, err := forge.New("ferry-dev", "plans", "token", gh.URL)
	if err != nil {
		t.Fatal(err)
	}
	r := &StatusRecorder{Store: store, Forge: client}
	if err := r.Restore(ctx, &Loop{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(ctx, Cycle{}); err != nil {
		t.Fatal(err)
	}
	if now := g.Run(t, "rev-parse", statusfile.DefaultBranch); now != head {
		t.Errorf("the restart's first flush committed %s on an unchanged status", now)
	}
	comments := gh.Comments(1)
	if len(comments) != 1 || !strings.HasPrefix(comments[0].Body, forge.Marker("progress/capi-quickstart")) || !strings.Contains(comments[0].Body, "| cluster | Succeeded |") {
		t.Errorf("comments on #1 after the restart's first flush: %+v; want the progress comment with cluster Succeeded", comments)
	}
	got := map[string]string{}
	for _, s := range gh.Statuses() {
		if s.SHA == merge {
			got[s.Context] = s.State
		}
	}
	if got["ferry/capi-quickstart/cluster"] != forge.StateSuccess {
		t.Errorf("commit statuses on the merge after the restart's first flush: %v; want ferry/capi-quickstart/cluster success", got)
	}

	// Mirrored once: a second flush with nothing changed writes nothing.
	before := len(gh.Statuses())
	if err := r.Flush(ctx, Cycle{}); err != nil {
		t.Fatal(err)
	}
	if n := len(gh.Statuses()); n != before {
		t.Errorf("a second flush with nothing changed set %d more commit statuses", n-before)
	}
}
