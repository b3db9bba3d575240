package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/status"
)

// Runs rollbackFirst, rollbackFirst+rollbackEvery, … (5, 11, 17, …: six
// runs hold one) migrate the adopt fixture, roll every phase back
// (the rollback scenario) and strike during the undo.
const (
	rollbackEvery = 6
	rollbackFirst = 5
)

// undoFaults are the rollback runs' faults, in the order those runs take
// them: each strikes when the status first shows a phase RollingBack.
var undoFaults = []fault{
	{name: "kill -9 the executor replica running an undo step", undo: true, inject: func(ctx context.Context, w *world, _ int) error {
		name, why := w.undoExecutor(ctx)
		w.out.say("==> %s: %s", name, why)
		return w.kill9(time.Second, name)
	}},
	{name: "kill -9 the reconciler during an undo", undo: true, inject: killReconciler},
}

const (
	// undoCatch is how long an undo fault looks for an executor replica
	// in the middle of an undo step before it takes the one that began
	// the latest; undoPoll how often it looks.
	undoCatch = 5 * time.Second
	undoPoll  = 10 * time.Millisecond
	// statusPoll is how often waitRollingBack reads the status once every
	// phase has succeeded (every second before).
	statusPoll = 50 * time.Millisecond
	// undoneSettle is how long a rollback run waits after its rollback
	// before it reads its end state: what controllers still do after the
	// last undo step (a last reconcile, a garbage collection) shows in
	// every run alike.
	undoneSettle = 20 * time.Second
)

// waitRollingBack waits until the plan's status first shows a phase
// RollingBack, reading the status branch through a clone of its own (the
// demo's reader serves the rollback's own wait): every second while the
// migration goes forward, every statusPoll once every phase has
// succeeded.
func (w *world) waitRollingBack(ctx context.Context) error {
	reader := w.forge.remote().store(filepath.Join(w.dir, "undo-watch"))
	every := time.Second
	for {
		if st, err := reader.Read(ctx, w.sc.cluster); err == nil {
			succeeded := len(st.Phases) > 0
			for _, ph := range st.Phases {
				if ph.State == status.PhaseRollingBack {
					_, detail, _ := rollbackProgress(st, w.sc.phases)
					w.out.say("==> an undo runs: phase %s is %s (%s)", ph.Name, ph.State, detail)
					return nil
				}
				succeeded = succeeded && ph.State == status.PhaseSucceeded
			}
			if succeeded {
				every = statusPoll
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for a phase RollingBack: %w", ctx.Err())
		case <-time.After(every):
		}
	}
}

// undoExecutor is the executor replica to kill during an undo and why:
// the first seen in the middle of a step within undoCatch (once every
// phase succeeded, every step run is an undo step), else the one whose
// latest step began last.
func (w *world) undoExecutor(ctx context.Context) (name, why string) {
	deadline := time.Now().Add(undoCatch)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if name, line := w.executorRunning(func(string) bool { return true }); name != "" {
			return name, "it runs " + stepText(line)
		}
		sleep(ctx, undoPoll)
	}
	latest, line := "", ""
	w.executorLogs(func(name string, lines []string) {
		for _, l := range lines {
			// slog's text format begins with time=<RFC 3339>: later
			// lines sort after.
			if strings.Contains(l, `msg="running step"`) && l > line {
				latest, line = name, l
			}
		}
	})
	if latest == "" {
		return "executor-1", fmt.Sprintf("no replica began a step; none was in one for %s", undoCatch)
	}
	return latest, fmt.Sprintf("none was in a step for %s; it began the latest, %s", undoCatch, stepText(line))
}

// stepText names the step of an executor's "running step" log line.
func stepText(line string) string {
	return fmt.Sprintf("step %s of phase %s (action=%s target=%s)",
		logField(line, "step"), logField(line, "phase"), logField(line, "action"), logField(line, "target"))
}

// captureRolledBack adds to a rollback run's end state how its world
// compares with before: a line per difference, marked allowed (what a
// rollback cannot undo, rollbackAllowed) or not, the same in every run
// whose rollback ended the same, and a violation per difference not
// allowed.
func (w *world) captureRolledBack(ctx context.Context, before *worldLines, st *endState) error {
	after, err := readWorld(ctx, w, true)
	if err != nil {
		return err
	}
	path, err := w.saveLines("world-after.txt", after.lines)
	if err != nil {
		return err
	}
	diffs := judge(diffLines(before.lines, after.lines), rollbackAllowed)
	summary, _ := diffSummary(before.lines, diffs)
	w.out.say("==> the world after the rollback (%s), compared with before: %s", path, summary)
	for _, d := range diffs {
		w.out.say("    %s", d)
		st.lines = append(st.lines, "rolled back, compared with before: "+d.String())
		if d.allowed == "" {
			st.violations = append(st.violations, "the rollback left the world otherwise than before: "+d.line)
		}
	}
	sort.Strings(st.lines)
	return nil
}
