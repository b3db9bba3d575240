package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/ferry-dev/ferry/internal/status"
)

// rollbackCycles is the run of a rollback scenario that rolls back to
// none once for each phase of after: the world is recorded before the
// first pull request; then in each cycle the migration goes forward up to
// that phase (a pull request per phase), a pull request rolls every phase
// back, and after rollbackSettle the world is compared with the one
// recorded (rollbackAllowed the only differences). With again, a last
// series of pull requests migrates through every phase once more and the
// fixture's checks run, as after a first migration: a cluster rolled back
// must take a second migration as well as the first. With crash, one
// more cycle repeats the last one, and its reconciler is killed (SIGKILL)
// as soon as a phase shows RollingBack and started again a second later,
// as a crash or an eviction would: the undo it left half done must still
// leave the world as it was, with no effect repeated, and the status the
// same phases and steps as the undisturbed cycle before it (what `make
// chaos` compares between a disturbed run and an undisturbed one, here in
// one world).
func rollbackCycles(after []string, again, crash bool) func(context.Context, *world) error {
	return func(ctx context.Context, w *world) error { return w.rollbackCycles(ctx, after, again, crash) }
}

func (w *world) rollbackCycles(ctx context.Context, after []string, again, crash bool) error {
	out, phases := w.out, w.sc.phases
	before, err := w.recordWorld(ctx)
	if err != nil {
		return err
	}
	creates, err := auditCreates(w.fx.cloud.Mgmt.AuditLog)
	if err != nil {
		return err
	}
	secrets := before.secrets
	var summaries []string
	cycles := after
	if crash {
		cycles = append(slices.Clone(after), after[len(after)-1])
	}
	var previous *cycleResult
	for i, last := range cycles {
		upTo := phases[:slices.Index(phases, last)+1]
		crashed := crash && i == len(cycles)-1
		name := "the rollback after " + last
		if len(cycles) > 1 {
			name = fmt.Sprintf("cycle %d of %d (rolled back after %s)", i+1, len(cycles), last)
		}
		out.say("\n==> %s: migrate through %s, roll every phase back, compare the world with how it was before the first pull request", name, strings.Join(upTo, ", "))
		if i > 0 {
			out.say("    (pull requests and comments from here on show ferry's phase tables only)")
		}
		if crashed {
			out.say("    the cycle before again, but the reconciler is killed (kill -9) as soon as a phase is RollingBack and started again, as a crash would; its status must end as that cycle's did")
		}
		began := time.Now()
		res, err := w.rollbackCycle(ctx, before, creates, upTo, i == 0, crashed)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if crashed {
			if d := diffLines(previous.status, res.status); len(d) > 0 {
				return fmt.Errorf("%s: the status differs from the undisturbed cycle's in %d lines: %s", name, len(d), strings.Join(first(d, 6), " | "))
			}
			res.summary += fmt.Sprintf("; its status's %d phase and step lines as the undisturbed cycle's", len(res.status))
		}
		previous = res
		creates, secrets = res.creates, slices.Concat(secrets, res.secrets)
		summaries = append(summaries, res.summary)
		out.say("==> %s took %s", name, time.Since(began).Round(time.Second))
	}
	out.say("\n==> the rollback cycles")
	for _, s := range summaries {
		out.say("    ✓ %s", s)
	}
	want := every(phases, status.PhaseRolledBack)
	var unpaused time.Time
	if again {
		out.say("\n==> after the last rollback: migrate once more, a pull request per phase (spec.rollback removed, spec.approve raised)")
		began := time.Now()
		if unpaused, err = w.approve(ctx, phases, false); err != nil {
			return fmt.Errorf("the migration after the rollbacks: %w", err)
		}
		out.say("\n==> the %d phases took %s through pull requests", len(phases), time.Since(began).Round(time.Second))
		want = every(phases, status.PhaseSucceeded)
	}
	if err := w.endStatus(ctx, want); err != nil {
		return err
	}
	out.say("\n==> what the whole run must not have done")
	repeated, _, err := createdSince(w.fx.cloud.Mgmt.AuditLog, creates)
	if err != nil {
		return err
	}
	if problems, err := w.effects(ctx, repeated, secrets); err != nil || len(problems) > 0 {
		return problemsErr(err, problems)
	}
	if !again {
		return nil
	}
	return verify(ctx, out, w.fx, unpaused)
}

// cycleResult is what one rollback cycle saw: its summary line, the
// audit log's create counts at its end, the Secrets read, and the status
// file's phases and steps (statusLines).
type cycleResult struct {
	summary string
	creates map[string]int
	secrets []corev1.Secret
	status  []string
}

// rollbackCycle migrates through upTo (the comments whole when full),
// rolls every phase back (killing the reconciler during the undo when
// crash), waits rollbackSettle and compares the world
// with before; it fails when a difference is not allowed or an object
// was created twice since creates (the audit log's counts when the cycle
// began) or a cloud name is carried twice.
func (w *world) rollbackCycle(ctx context.Context, before *worldLines, creates map[string]int, upTo []string, full, crash bool) (*cycleResult, error) {
	out, last := w.out, upTo[len(upTo)-1]
	if _, err := w.approve(ctx, upTo, full); err != nil {
		return nil, err
	}
	var crashed chan error
	undoing, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if crash {
		crashed = make(chan error, 1)
		go func() {
			if err := w.waitRollingBack(undoing); err != nil {
				crashed <- fmt.Errorf("no phase was seen RollingBack, so the reconciler was not killed: %w", err)
				return
			}
			err := killReconciler(undoing, w, 0)
			if err == nil {
				w.out.say("==> the reconciler was killed (kill -9) during the undo and started again")
			}
			crashed <- err
		}()
	}
	if err := w.rollbackPR(ctx, toNone(w.sc.phases), full); err != nil {
		return nil, err
	}
	if crashed != nil {
		stopWatch()
		if err := <-crashed; err != nil {
			return nil, fmt.Errorf("the reconciler killed during the undo: %w", err)
		}
	}
	settled := time.Now().Add(rollbackSettle)
	if err := out.wait(ctx, fmt.Sprintf("%s after the rollback before comparing (rollbackSettle)", rollbackSettle), func() (bool, string) {
		return !time.Now().Before(settled), "the controllers may still act after the last undo step"
	}); err != nil {
		return nil, err
	}
	out.say("==> comparing the world with how it was before the first pull request")
	after, summary, notAllowed, err := w.judgeWorld(ctx, before, "world-after-"+last+".txt", "rolled back after "+last+": ")
	if err != nil {
		return nil, err
	}
	if crash {
		summary += " (the reconciler killed during the undo)"
	}
	ps, err := w.reader.Read(ctx, w.sc.cluster)
	if err != nil {
		return nil, err
	}
	res := &cycleResult{summary: summary, secrets: after.secrets, status: statusLines(ps, after.normalize)}
	var repeated []string
	if repeated, res.creates, err = createdSince(w.fx.cloud.Mgmt.AuditLog, creates); err != nil {
		return nil, err
	}
	repeated = slices.Concat(after.repeated, repeated)
	for _, r := range repeated {
		out.say("    ✗ repeated in this cycle: %s", r)
	}
	var problems []string
	if len(notAllowed) > 0 {
		problems = append(problems, fmt.Sprintf("the world differs from before the first pull request in %d lines not allowed: %s",
			len(notAllowed), strings.Join(first(notAllowed, 6), " | ")))
	}
	if len(repeated) > 0 {
		problems = append(problems, fmt.Sprintf("%d effects repeated: %s", len(repeated), strings.Join(repeated, "; ")))
	}
	return res, problemsErr(nil, problems)
}

// createdSince lists the objects the API server's audit log shows created
// more than once since base (its counts then: auditCreates), and returns
// the counts now.
func createdSince(auditLog string, base map[string]int) ([]string, map[string]int, error) {
	now, err := auditCreates(auditLog)
	if err != nil {
		return nil, nil, err
	}
	var out []string
	for key, n := range now {
		if n-base[key] > 1 {
			out = append(out, fmt.Sprintf("%s created %d times", key, n-base[key]))
		}
	}
	sort.Strings(out)
	return out, now, nil
}

// problemsErr is err, or an error listing problems (nil when there are
// none).
func problemsErr(err error, problems []string) error {
	if err != nil || len(problems) == 0 {
		return err
	}
	return fmt.Errorf("%s", strings.Join(problems, "; "))
}
