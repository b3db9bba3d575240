package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/reconciler"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/status/render"
	"github.com/ferry-dev/ferry/internal/status/statusfile"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// statusOf is the status of a plan whose cluster phase runs: one step
// done, one failing and retried.
func statusOf(plan string) *status.PlanStatus {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	mk := func(action step.Action, kind, name string) step.Step {
		return step.Step{
			Key: step.Key("cluster", action, step.Target{Kind: kind, Name: name}), Phase: "cluster",
			Executor: step.Kube, Action: action, Target: step.Target{Kind: kind, Namespace: "default", Name: name},
		}
	}
	secret, cluster := mk(step.CopySecret, step.Secret, plan+"-cloud-config"), mk(step.Create, step.Cluster, plan)
	res := &planner.Result{
		Plan: plan, Approve: "cluster", Runnable: "cluster",
		Phases: []planner.Phase{
			{Name: "cluster", State: planner.Approved, Groups: []step.Group{{Steps: []step.Step{secret, cluster}}}},
			{Name: "control-plane", State: planner.Pending, Reason: "not approved: spec.approve is cluster"},
		},
	}
	st := status.FromResult(nil, res, "4f1c2a9e8b7d6c5b4a39281706f5e4d3c2b1a090", t0)
	status.Published(st, res.Next().Steps, t0.Add(time.Second))
	result := func(s step.Step, o events.Outcome, attempt int, errText string) *events.ResultEvent {
		return &events.ResultEvent{
			Type: events.TypeResult, Plan: plan, Revision: st.Revision, Phase: s.Phase, StepKey: s.Key,
			Executor: s.Executor, Outcome: o, Attempt: attempt, Duration: time.Second, Error: errText,
			At: t0.Add(time.Duration(10*attempt) * time.Second),
		}
	}
	status.ApplyResult(st, result(secret, events.Succeeded, 1, ""))
	status.ApplyResult(st, result(cluster, events.Retrying, 2, "admission webhook denied the request"))
	status.SetApproval(st, status.Approval{Phase: "cluster", By: "alice", PR: 12})
	return st
}

// TestStatusCommand reads statuses that a gitsource.Branch pushed to a
// real Git server: the phase tables of all plans or of one, JSON, and the
// errors.
func TestStatusCommand(t *testing.T) {
	g := testenv.StartGit(t, "../../internal/testing/testenv/testdata/seed")
	ctx := t.Context()
	sts := []*status.PlanStatus{statusOf("alpha"), statusOf("beta")}

	// Before the first write there is no status branch.
	var stdout, stderr bytes.Buffer
	if code := run([]string{"status", "--repo", g.URL}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "no plan has a status yet on branch ferry/status") {
		t.Errorf("status before any write = %d, stderr %q; want 1 and no status yet", code, stderr.String())
	}

	w := reconciler.GitStatusStore{Git: &gitsource.Branch{URL: g.URL, Name: statusfile.DefaultBranch, CacheDir: t.TempDir()}}
	if _, err := w.Write(ctx, sts); err != nil {
		t.Fatal(err)
	}
	var tables []string
	for _, st := range sts {
		var b bytes.Buffer
		if err := render.Table(&b, st); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, b.String())
	}

	for _, tc := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "all plans", args: []string{"status", "--repo", g.URL}, wantStdout: tables[0] + "\n" + tables[1]},
		{name: "one plan, flags after it", args: []string{"status", "beta", "--repo", g.URL, "--status-branch", statusfile.DefaultBranch}, wantStdout: tables[1]},
		{name: "unknown plan", args: []string{"status", "gamma", "--repo", g.URL}, wantCode: 1,
			wantStderr: "reconciler status: plan gamma has no status yet on branch ferry/status of " + g.URL + "\n"},
		{name: "other branch", args: []string{"status", "alpha", "--repo", g.URL, "--status-branch", "main"}, wantCode: 1,
			wantStderr: "reconciler status: plan alpha has no status yet on branch main of " + g.URL + "\n"},
		{name: "two plans", args: []string{"status", "alpha", "beta", "--repo", g.URL}, wantCode: 2},
		{name: "no repository", args: []string{"status"}, wantCode: 2},
		{name: "bad output", args: []string{"status", "--repo", g.URL, "-o", "xml"}, wantCode: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			if code != tc.wantCode || stdout.String() != tc.wantStdout || (tc.wantStderr != "" && stderr.String() != tc.wantStderr) {
				t.Errorf("run(%q) = %d\nstdout:\n%s\nstderr:\n%s\nwant %d\nstdout:\n%s\nstderr:\n%s",
					tc.args, code, stdout.String(), stderr.String(), tc.wantCode, tc.wantStdout, tc.wantStderr)
			}
		})
	}

	t.Run("json", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		if code := run([]string{"status", "alpha", "--repo", g.URL, "-o", "json"}, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		var got status.PlanStatus
		if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
			t.Fatalf("%v:\n%s", err, stdout.String())
		}
		if !reflect.DeepEqual(&got, sts[0]) {
			t.Errorf("JSON status of alpha:\n%s\nwant the written status %+v", stdout.String(), sts[0])
		}
		stdout.Reset()
		if code := run([]string{"status", "--repo", g.URL, "-o", "json"}, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		var all []*status.PlanStatus
		if err := json.Unmarshal(stdout.Bytes(), &all); err != nil || !reflect.DeepEqual(all, sts) {
			t.Errorf("JSON of all plans = %v (%v); want the two written statuses", all, err)
		}
	})

	t.Run("yaml", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		if code := run([]string{"status", "beta", "--repo", g.URL, "-o", "yaml"}, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		var got status.PlanStatus
		if err := yaml.Unmarshal(stdout.Bytes(), &got); err != nil || !reflect.DeepEqual(&got, sts[1]) {
			t.Errorf("YAML status of beta (%v):\n%s\nwant the written status %+v", err, stdout.String(), sts[1])
		}
	})

	t.Run("exit codes", func(t *testing.T) {
		// A script tells a failed phase (3) from a blocked one (4).
		for _, tc := range []struct {
			state status.PhaseState
			code  int
			say   string
		}{{status.PhaseFailed, 3, "failed: delta/cluster"}, {status.PhaseBlocked, 4, "blocked: delta/cluster"}} {
			branch := "status-" + strings.ToLower(string(tc.state))
			st := statusOf("delta")
			st.Phases[0].State = tc.state
			w := reconciler.GitStatusStore{Git: &gitsource.Branch{URL: g.URL, Name: branch, CacheDir: t.TempDir()}}
			if _, err := w.Write(ctx, []*status.PlanStatus{st}); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"status", "--repo", g.URL, "--status-branch", branch}, {"status", "delta", "--repo", g.URL, "--status-branch", branch, "-o", "json"}} {
				var stdout, stderr bytes.Buffer
				code := run(args, &stdout, &stderr)
				if code != tc.code || !strings.Contains(stderr.String(), tc.say) || !strings.Contains(stdout.String(), string(tc.state)) {
					t.Errorf("run(%q) with a phase %s = %d, stderr %q; want %d, %q and the status printed", args, tc.state, code, stderr.String(), tc.code, tc.say)
				}
			}
		}
	})

	t.Run("watch", func(t *testing.T) {
		// --watch prints a line when a phase changes and ends when
		// nothing is in progress: 0 once the phase succeeded, 3 at once
		// when one failed; a phase Blocked on the way is followed, not
		// ended on (ferry goes on once the cause is gone).
		for _, tc := range []struct {
			end  status.PhaseState
			code int
		}{{status.PhaseSucceeded, 0}, {status.PhaseFailed, 3}} {
			branch := "watch-" + strings.ToLower(string(tc.end))
			w := reconciler.GitStatusStore{Git: &gitsource.Branch{URL: g.URL, Name: branch, CacheDir: t.TempDir()}}
			st := statusOf("delta")
			st.Phases[0].State = status.PhaseRunning
			if _, err := w.Write(ctx, []*status.PlanStatus{st}); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			done := make(chan int)
			go func() {
				done <- run([]string{"status", "delta", "--repo", g.URL, "--status-branch", branch, "--watch", "--watch-interval", "100ms"}, &stdout, &stderr)
			}()
			select {
			case code := <-done:
				t.Fatalf("--watch ended (%d) while a phase runs: %s %s", code, stdout.String(), stderr.String())
			case <-time.After(time.Second):
			}
			st = statusOf("delta")
			st.Phases[0].State = status.PhaseBlocked
			if _, err := w.Write(ctx, []*status.PlanStatus{st}); err != nil {
				t.Fatal(err)
			}
			select {
			case code := <-done:
				t.Fatalf("--watch ended (%d) on a phase Blocked for a moment: %s %s", code, stdout.String(), stderr.String())
			case <-time.After(time.Second):
			}
			st = statusOf("delta")
			st.Phases[0].State = tc.end
			if _, err := w.Write(ctx, []*status.PlanStatus{st}); err != nil {
				t.Fatal(err)
			}
			select {
			case code := <-done:
				out := stdout.String()
				if code != tc.code || strings.Count(out, "delta cluster Running") != 1 || !strings.Contains(out, "delta cluster "+string(tc.end)) {
					t.Errorf("--watch until %s = %d, stdout:\n%s\nstderr: %s\nwant %d, one Running line and one %s line", tc.end, code, out, stderr.String(), tc.code, tc.end)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("--watch did not end after the phase became %s: %s", tc.end, stdout.String())
			}
		}
	})

	t.Run("file URL", func(t *testing.T) {
		// The README's laptop setup: a repository on disk, no flags
		// about credentials.
		var stdout, stderr bytes.Buffer
		if code := run([]string{"status", "alpha", "--repo", "file://" + g.Dir}, &stdout, &stderr); code != 0 || stdout.String() != tables[0] {
			t.Errorf("status of a file:// repository: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
		}
	})

	t.Run("token file", func(t *testing.T) {
		// The test server ignores credentials: this checks that a token
		// is read and sent without breaking anything, and never printed.
		file := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(file, []byte("s3cret-token\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, flag := range []string{"--git-token-file", "--token-file"} { // --token-file: deprecated
			var stdout, stderr bytes.Buffer
			if code := run([]string{"status", "alpha", "--repo", g.URL, flag, file}, &stdout, &stderr); code != 0 || stdout.String() != tables[0] {
				t.Errorf("with a token in %s: exit %d, stdout %q, stderr %q", flag, code, stdout.String(), stderr.String())
			}
			if deprecated := strings.Contains(stderr.String(), "--token-file has been deprecated"); deprecated != (flag == "--token-file") {
				t.Errorf("%s: stderr %q", flag, stderr.String())
			}
			if code := run([]string{"status", "--repo", g.URL, flag, filepath.Join(t.TempDir(), "missing")}, &stdout, &stderr); code != 1 {
				t.Errorf("missing token file in %s: exit %d; want 1", flag, code)
			}
		}
	})
}
