package reconciler

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/redact"
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
	// The killed process: committed, never mirrored.
	g, store, st := committedStatus(t, status.PhaseStatus{Name: "cluster", State: status.PhaseSucceeded, Done: 11})
	merge := st.Revision
	head := g.Run(t, "rev-parse", statusfile.DefaultBranch)

	gh, client := mergedPR(t, merge, "Approve cluster")
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

// TestRecordedStatusHoldsNoSecrets: a step's error that quotes what an
// OpenStack service echoed of its request (a registered password, a
// password JSON field, an auth_url with credentials and a token in its
// query string), and an observation error that quotes the same, reach
// the status file on a real Git server's status branch, the progress
// comment on the pull request and the recorder's status with none of
// the secrets in them, and still say what failed.
func TestRecordedStatusHoldsNoSecrets(t *testing.T) {
	const registered = "record-test-Pa55w0rd"
	redact.Register(registered)
	planted := []string{registered, "url-pa55", "query-t0ken", "unregistered-pw", "capo:"}
	leak := "authenticate to cloud \"openstack\" at https://capo:url-pa55@keystone.example/v3?token=query-t0ken: got 400 instead: " +
		`{"request": {"password": "unregistered-pw", "echo": "` + registered + `"}}`

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g := testenv.StartGit(t, testenv.SeedDir(t, map[string]string{"README.md": "plans\n"}))
	store := GitStatusStore{Git: &gitsource.Branch{URL: g.URL, Name: statusfile.DefaultBranch, CacheDir: t.TempDir()}}
	const merge = "0123456789abcdef0123456789abcdef01234567"
	const key = "prepare/resolve/openstack/names"
	st := &status.PlanStatus{Plan: "capi-quickstart", Revision: merge, Approve: "prepare",
		ApprovedBy: []status.Approval{{Phase: "prepare", By: "bob", PR: 1, Commit: merge}},
		Phases: []status.PhaseStatus{{Name: "prepare", State: status.PhaseRunning, Left: 1,
			Steps: []status.StepStatus{{Key: key, Executor: "openstack", Action: "resolve", Target: "names", State: status.StepRunning}}}}}
	if _, err := store.Write(ctx, []*status.PlanStatus{st}); err != nil {
		t.Fatal(err)
	}
	gh, client := mergedPR(t, merge, "Approve prepare")
	r := &StatusRecorder{Store: store, Forge: client}
	if err := r.Restore(ctx, &Loop{}); err != nil {
		t.Fatal(err)
	}
	r.Result(ctx, &events.ResultEvent{Type: events.TypeResult, Plan: "capi-quickstart", Revision: merge, Phase: "prepare", StepKey: key,
		Action: "resolve", Target: "names", Executor: "openstack", Attempt: 1, At: time.Now(),
		Outcome: events.Failed, Terminal: true, Error: leak, Report: events.Report{Message: "tried " + leak}})
	r.Unobserved(ctx, Cycle{Revision: merge, At: time.Now()}, "plans/capi-quickstart.yaml", "capi-quickstart", errors.New("observe the cloud: "+leak))
	if err := r.Flush(ctx, Cycle{Revision: merge, At: time.Now()}); err != nil {
		t.Fatal(err)
	}

	path, err := statusfile.Path("capi-quickstart")
	if err != nil {
		t.Fatal(err)
	}
	file := g.Run(t, "show", statusfile.DefaultBranch+":"+path)
	var comment string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c := gh.Comments(1); len(c) > 0 && strings.Contains(c[0].Body, "got 400") {
			comment = c[0].Body
			break
		}
	}
	live := r.Status("capi-quickstart")
	for what, text := range map[string]string{
		"the status file": file, "the progress comment": comment,
		"the recorded error": live.Phases[0].Steps[0].LastError, "the recorded message": live.Phases[0].Steps[0].Message,
		"the unobserved reason": live.Unobserved,
	} {
		for _, s := range planted {
			if strings.Contains(text, s) {
				t.Errorf("%s holds %q:\n%s", what, s, text)
			}
		}
		// The comment escapes Markdown: "\*\*\*".
		if unescaped := strings.ReplaceAll(text, `\*`, "*"); !strings.Contains(unescaped, "https://***@keystone.example/v3?***: got 400 instead") {
			t.Errorf("%s does not say what failed:\n%s", what, text)
		}
	}
}

// TestFlushNotesUnrecordedStatus: the status branch refuses every push (a
// pre-receive hook on a real Git server). The first failed write leaves
// the pull request alone; once the writes have failed for NoteAfter, the
// progress comment shows the status with a note that Git does not hold
// it and why; the first write that succeeds takes the note away.
func TestFlushNotesUnrecordedStatus(t *testing.T) {
	ctx := context.Background()
	g, store, st := committedStatus(t, status.PhaseStatus{Name: "cluster", State: status.PhaseRunning, Done: 3, Left: 8})
	merge := st.Revision
	head := g.Run(t, "rev-parse", statusfile.DefaultBranch)
	hook := filepath.Join(g.Dir, "hooks", "pre-receive")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\necho 'pushes are refused' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	gh, client := mergedPR(t, merge, "Approve cluster")
	now := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	r := &StatusRecorder{Store: store, Forge: client, NoteAfter: 5 * time.Minute, Now: func() time.Time { return now }}
	if err := r.Restore(ctx, &Loop{}); err != nil {
		t.Fatal(err)
	}
	// Restored: every status is written again, which the hook refuses.
	st.Phases[0].Done, st.Phases[0].Left = 4, 7
	r.statuses[st.Plan] = st.Clone()
	comment := func() string {
		t.Helper()
		cs := gh.Comments(1)
		if len(cs) == 0 {
			return ""
		}
		return cs[0].Body
	}
	if err := r.Flush(ctx, Cycle{}); err == nil {
		t.Fatal("a flush to a status branch that refuses pushes succeeded")
	}
	if c := comment(); c != "" {
		t.Errorf("after the first failed write, #1 has a comment:\n%s\nwant none yet", c)
	}
	now = now.Add(6 * time.Minute)
	if err := r.Flush(ctx, Cycle{}); err == nil {
		t.Fatal("the second flush succeeded")
	}
	if c := comment(); !strings.Contains(c, "has not been able to record the status on its status branch since 2026-11-28 08:00 UTC") ||
		!strings.Contains(c, "pre-receive hook declined") || !strings.Contains(c, "| cluster | Running |") {
		t.Errorf("after writes failed for 6 minutes, #1's comment:\n%s\nwant the note, its cause and the status", c)
	}
	if now := g.Run(t, "rev-parse", statusfile.DefaultBranch); now != head {
		t.Fatalf("the status branch moved to %s while the hook refused pushes", now)
	}

	if err := os.Remove(hook); err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(ctx, Cycle{}); err != nil {
		t.Fatal(err)
	}
	if c := comment(); strings.Contains(c, "has not been able to record") || !strings.Contains(c, "| cluster | Running |") {
		t.Errorf("after a write succeeded, #1's comment:\n%s\nwant the status without the note", c)
	}
	if g.Run(t, "rev-parse", statusfile.DefaultBranch) == head {
		t.Error("the status branch did not move once pushes were accepted")
	}
}

// mergedPR is the GitHub stand-in with pull request #1, titled title,
// merged as merge, and ferry's client of it.
func mergedPR(t *testing.T, merge, title string) (*fakegithub.Server, forge.Forge) {
	t.Helper()
	gh := fakegithub.New("ferry-dev", "plans", "token")
	t.Cleanup(gh.Close)
	gh.AddPR(fakegithub.PR{Number: 1, State: "closed", Title: title, Head: merge, Base: "main"})
	client, err := forge.New("ferry-dev", "plans", "token", gh.URL)
	if err != nil {
		t.Fatal(err)
	}
	return gh, client
}

// committedStatus starts a Git server and commits on its status branch the
// status of capi-quickstart, approved up to cluster by bob in #1, with
// cluster as given and control-plane pending; it returns the server, the
// store and the status (its Revision is #1's merge).
func committedStatus(t *testing.T, cluster status.PhaseStatus) (*testenv.Git, GitStatusStore, *status.PlanStatus) {
	t.Helper()
	g := testenv.StartGit(t, testenv.SeedDir(t, map[string]string{"README.md": "plans\n"}))
	store := GitStatusStore{Git: &gitsource.Branch{URL: g.URL, Name: statusfile.DefaultBranch, CacheDir: t.TempDir()}}
	const merge = "0123456789abcdef0123456789abcdef01234567"
	st := &status.PlanStatus{Plan: "capi-quickstart", Revision: merge, Approve: "cluster",
		ApprovedBy: []status.Approval{{Phase: "cluster", By: "bob", PR: 1, Commit: merge}},
		Phases:     []status.PhaseStatus{cluster, {Name: "control-plane", State: status.PhasePending, Left: 11}}}
	if _, err := store.Write(context.Background(), []*status.PlanStatus{st}); err != nil {
		t.Fatal(err)
	}
	return g, store, st
}
