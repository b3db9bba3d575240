package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/ferry-dev/ferry/internal/reconciler"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/testing/ostest"
)

const (
	// rollbackWait is how long the rollback of every phase may take.
	rollbackWait = 5 * time.Minute
	// outageMax is the longest the cluster's endpoint may fail to answer
	// during the rollback; it is checked every endpointEvery.
	outageMax     = 5 * time.Second
	endpointEvery = time.Second
	// commentWait is how long the progress comment may lag the status
	// (ferry mirrors it every second).
	commentWait = time.Minute
	// blockedMax is how long a phase may stay Blocked during a rollback
	// before the demo gives up on it: a health check that fails for a
	// while (nodes not Ready yet) clears sooner, a rollback ferry refuses
	// never does.
	blockedMax = 2 * time.Minute
	// rollbackSettle is how long the demo waits after a rollback before
	// it compares the world: controllers may act after the last undo step
	// (a Machine controller's last reconcile, a garbage collection), and
	// what they change then must show in the comparison too.
	rollbackSettle = 20 * time.Second
)

// allowance is a difference between the world before the migration and
// after its rollback that the rollback cannot undo: the "-" line (before)
// and the "+" line (after) of one object, paired by their expressions'
// first group (the object's name).
type allowance struct {
	why           string
	before, after *regexp.Regexp
}

// rollbackAllowed are the only differences a rollback may leave (the
// docs/migrating.md lists them). Nothing else may differ.
var rollbackAllowed = []allowance{{
	// ferry sets spec.providerID (openstack:///<server-id>) on the nodes
	// that had none, and Kubernetes never lets it be cleared or changed
	// once set.
	why:    "a Node's spec.providerID cannot be cleared once set",
	before: regexp.MustCompile(`^Node (\S+) spec\.providerID: <none>$`),
	after:  regexp.MustCompile(`^Node (\S+) spec\.providerID: openstack:///.+$`),
}}

// judged is one line of a diff ("- …" or "+ …") and, when allowed, why.
type judged struct {
	line, allowed string
}

func (j judged) String() string {
	if j.allowed == "" {
		return "✗ " + j.line
	}
	return fmt.Sprintf("✓ %s (allowed: %s)", j.line, j.allowed)
}

// judge marks the lines of diffs that allow allows: a "-" line matching an
// allowance's before and a "+" line matching its after, for the same
// name, are both allowed; either alone is not.
func judge(diffs []string, allow []allowance) []judged {
	out := make([]judged, len(diffs))
	for i, d := range diffs {
		out[i].line = d
	}
	for _, a := range allow {
		removed, added := map[string][]int{}, map[string][]int{}
		for i, d := range diffs {
			switch {
			case strings.HasPrefix(d, "- "):
				if m := a.before.FindStringSubmatch(d[2:]); m != nil {
					removed[m[1]] = append(removed[m[1]], i)
				}
			case strings.HasPrefix(d, "+ "):
				if m := a.after.FindStringSubmatch(d[2:]); m != nil {
					added[m[1]] = append(added[m[1]], i)
				}
			}
		}
		for name, rs := range removed {
			as := added[name]
			if len(rs) != 1 || len(as) != 1 {
				continue
			}
			out[rs[0]].allowed, out[as[0]].allowed = a.why, a.why
		}
	}
	return out
}

// cloudKinds are the world lines' kinds of cloud resources.
var cloudKinds = map[string]bool{"server": true, "port": true, "floating-ip": true, "security-group": true, "keypair": true}

// lineCounts says what world lines cover: Kubernetes objects (a Node's
// lines are one object), servers and Secrets.
func lineCounts(lines []string) string {
	objects := map[string]bool{}
	servers, secrets := 0, 0
	for _, l := range lines {
		kind, rest, _ := strings.Cut(l, " ")
		name, _, _ := strings.Cut(rest, " ")
		switch {
		case kind == "server":
			servers++
		case kind == "Secret":
			secrets++
		case !cloudKinds[kind]:
			objects[kind+" "+strings.TrimSuffix(name, ":")] = true
		}
	}
	return fmt.Sprintf("%d lines (%d objects, %d servers, %d Secrets)", len(lines), len(objects), servers, secrets)
}

// diffSummary is "compared N lines (…); D differences, all allowed" (or
// how many are not), counting what before covers, and whether every
// difference is allowed.
func diffSummary(before []string, diffs []judged) (string, bool) {
	bad := 0
	for _, d := range diffs {
		if d.allowed == "" {
			bad++
		}
	}
	verdict := "all allowed"
	switch {
	case len(diffs) == 0:
		verdict = "the world is as it was"
	case bad > 0:
		verdict = fmt.Sprintf("%d not allowed", bad)
	}
	return fmt.Sprintf("compared %s; %d differences, %s", lineCounts(before), len(diffs), verdict), bad == 0
}

// recordWorld reads the world lines before the first pull request, with
// the digests of the Secrets' data: what the rollback must restore.
func (w *world) recordWorld(ctx context.Context) (*worldLines, error) {
	w.out.say("\n==> recording the world before the first pull request: the cloud project, the CAPI and CAPO objects, the Secrets (their data as digests), the workload cluster's Nodes and kube-system objects")
	before, err := readWorld(ctx, w, true)
	if err != nil {
		return nil, err
	}
	path, err := w.saveLines("world-before.txt", before.lines)
	if err != nil {
		return nil, err
	}
	w.out.say("    %s (in %s)", lineCounts(before.lines), path)
	return before, nil
}

// saveLines writes world lines to a file in the log directory, for a look
// at all that the comparison saw, and returns its path.
func (w *world) saveLines(name string, lines []string) (string, error) {
	path := filepath.Join(w.logDir, name)
	return path, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

// rollback opens the pull request that rolls every phase back, prints
// ferry's preview, merges it and waits until every phase is RolledBack,
// checking the cluster's endpoint every second meanwhile; it prints the
// progress comment.
func (w *world) rollback(ctx context.Context) error {
	return w.rollbackPR(ctx, toNone(w.sc.phases), true)
}

// undo is a pull request that rolls phases back: the spec.approve and
// spec.rollback.to it sets, and the phases it undoes (in the plan's
// order), which must end RolledBack.
type undo struct {
	approve, to string
	undone      []string
}

// toNone rolls every phase back: spec.approve "" and spec.rollback.to
// none.
func toNone(phases []string) undo { return undo{approve: `""`, to: "none", undone: phases} }

// spec is the plan's spec line that asks for the rollback.
func (u undo) spec() string { return "  rollback: {to: " + u.to + "}\n" }

// rollbackPR opens the pull request u, prints ferry's preview, merges it
// and waits until every phase it undoes is RolledBack, checking the
// cluster's endpoint every second meanwhile when the fixture has one; it
// prints the progress comment. full prints the comments whole, otherwise
// their phase tables.
func (w *world) rollbackPR(ctx context.Context, u undo, full bool) error {
	out := w.out
	n := w.openPR(fmt.Sprintf("alice: roll back to %s (spec.approve: %s, spec.rollback: {to: %s})", u.to, u.approve, u.to),
		"Roll back "+w.sc.cluster+" to "+u.to, w.fx.plan(u.approve, u.spec()))
	if err := w.showComment(ctx, n, reconcilerPreviewKey, "preview", w.heads[n][:12], full); err != nil {
		return err
	}
	watching := ""
	if w.fx.endpoint != nil {
		watching = fmt.Sprintf("; the endpoint is checked every %s meanwhile", endpointEvery)
	}
	out.say("==> bob merges #%d %s: the merge approves the rollback%s", n, w.forge.mergeStyle(n), watching)
	waitCtx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	watch := func() *downtime { return nil }
	if w.fx.endpoint != nil {
		watch = watchEndpoint(waitCtx, w.fx.endpoint, fail)
	}
	merged := w.forge.merge(n, "bob")
	err := waitRolledBack(waitCtx, out, w.reader, w.sc.cluster, u.undone)
	seen := watch()
	if err != nil {
		return err
	}
	if seen != nil {
		out.say("    %s", seen)
		if seen.longest > outageMax {
			return fmt.Errorf("the endpoint did not answer for %s, more than %s: %s", seen.longest.Round(100*time.Millisecond), outageMax, seen.last)
		}
	}
	// Undone last first: the first phase's row is the last to change.
	want := "| " + u.undone[0] + " | " + status.PhaseRolledBack.Text() + " |"
	commentCtx, cancel := context.WithTimeout(ctx, commentWait)
	defer cancel()
	err = w.showComment(commentCtx, n, w.sc.progressKey(), "progress", want, full)
	if others := w.progressElsewhere(n, merged); err != nil && len(others) > 0 {
		return fmt.Errorf("%w; ferry shows the progress of #%d's rollback on %s instead (the approval it records for %q is an earlier pull request's)",
			err, n, strings.Join(others, ", "), status.RollbackApproval(u.to))
	}
	return err
}

// waitRolledBack waits until the status branch says every phase of
// phases is RolledBack, showing each phase's state; it fails at once when
// a phase failed or the plan is invalid, when a phase stayed Blocked for
// blockedMax (a rollback ferry refuses, or one stuck on something it
// waits for), and after rollbackWait.
func waitRolledBack(ctx context.Context, out *display, reader reconciler.GitStatusStore, plan string, phases []string) error {
	ctx, cancel := context.WithTimeoutCause(ctx, rollbackWait, fmt.Errorf("the rollback did not end within %s", rollbackWait))
	defer cancel()
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	var blockedSince time.Time
	return out.wait(ctx, "phases "+strings.Join(phases, ", ")+" to be rolled back", func() (bool, string) {
		st, err := reader.Read(ctx, plan)
		if err != nil {
			return false, "no status yet"
		}
		done, detail, failed := rollbackProgress(st, phases)
		if failed != nil {
			fail(failed)
		}
		switch name := blockedPhase(st, phases); {
		case name == "":
			blockedSince = time.Time{}
		case blockedSince.IsZero():
			blockedSince = time.Now()
		case time.Since(blockedSince) > blockedMax:
			fail(fmt.Errorf("phase %s has been Blocked for %s", name, blockedMax))
		}
		return done, detail
	})
}

// blockedPhase is the first of phases the status says is Blocked ("" when
// none is); the progress line says why.
func blockedPhase(st *status.PlanStatus, phases []string) string {
	for _, p := range phases {
		if ph := st.Phase(p); ph != nil && ph.State == status.PhaseBlocked {
			return p
		}
	}
	return ""
}

// rollbackProgress reads a status: whether every phase is RolledBack,
// each phase's state (and reason, and running step) for the progress
// line, and an error naming the phase when one failed or the plan is
// invalid.
func rollbackProgress(st *status.PlanStatus, phases []string) (bool, string, error) {
	if len(st.Invalid) > 0 {
		return false, "invalid plan", fmt.Errorf("the plan at %s is invalid: %s", shortRev(st.Revision), strings.Join(st.Invalid, "; "))
	}
	done := true
	var parts []string
	var failed error
	for _, name := range phases {
		ph := st.Phase(name)
		if ph == nil {
			done = false
			parts = append(parts, name+" not in the status")
			continue
		}
		done = done && ph.State == status.PhaseRolledBack
		part := name + " " + string(ph.State)
		reason := ph.Reason
		for _, s := range ph.Steps {
			if s.State == status.StepRunning || s.State == status.StepRetrying {
				part += ", running " + s.Title()
				if s.LastError != "" {
					// Why the attempts so far failed: a drain names the
					// pods left and the budgets that hold them.
					part += fmt.Sprintf(" (attempt %d; last error: %s)", s.Attempts, s.LastError)
				}
			}
			if reason == "" && s.State == status.StepFailed {
				reason = s.Title() + ": " + s.LastError
			}
		}
		if reason != "" && ph.State != status.PhaseRolledBack {
			part += " (" + reason + ")"
		}
		if ph.State == status.PhaseFailed && failed == nil {
			if reason == "" {
				reason = "no reason given"
			}
			failed = fmt.Errorf("phase %s failed to roll back: %s", name, reason)
		}
		parts = append(parts, part)
	}
	detail := strings.Join(parts, "; ")
	if st.Stopped != "" {
		detail += "; stopped: " + st.Stopped
	}
	return done, detail, failed
}

func shortRev(rev string) string { return rev[:min(12, len(rev))] }

// downtime is what checks of the endpoint saw: how many failed, the
// longest time from a failed check to the next one that answered (or the
// last check), and the last failure.
type downtime struct {
	checks, failed int
	since          time.Time // the first failed check of the outage now, if any
	longest        time.Duration
	last           string
}

// observe records a check at at; it returns how long the endpoint has not
// answered (0 when it answered).
func (o *downtime) observe(at time.Time, ok bool, detail string) time.Duration {
	o.checks++
	if ok {
		o.since = time.Time{}
		return 0
	}
	o.failed++
	o.last = detail
	if o.since.IsZero() {
		o.since = at
	}
	o.longest = max(o.longest, at.Sub(o.since))
	return at.Sub(o.since)
}

func (o *downtime) String() string {
	if o.failed == 0 {
		return fmt.Sprintf("✓ the endpoint answered all %d checks during the rollback", o.checks)
	}
	mark := "✓"
	if o.longest > outageMax {
		mark = "✗"
	}
	return fmt.Sprintf("%s the endpoint answered %d of %d checks during the rollback; the longest it did not: %s (at most %s allowed); last failure: %s",
		mark, o.checks-o.failed, o.checks, o.longest.Round(100*time.Millisecond), outageMax, o.last)
}

// watchEndpoint runs check every endpointEvery until ctx ends or the
// returned function is called, which returns what the checks saw. When
// the endpoint has not answered for more than outageMax, it calls fail.
func watchEndpoint(ctx context.Context, check func(context.Context) ostest.Check, fail context.CancelCauseFunc) func() *downtime {
	ctx, stop := context.WithCancel(ctx)
	o := &downtime{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(endpointEvery)
		defer tick.Stop()
		for {
			checkCtx, cancel := context.WithTimeout(ctx, endpointEvery*3)
			c := check(checkCtx)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if down := o.observe(time.Now(), c.OK, c.Detail); down > outageMax {
				fail(fmt.Errorf("the cluster's endpoint has not answered for %s: %s", down.Round(100*time.Millisecond), c.Detail))
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() *downtime {
		stop()
		wg.Wait()
		return o
	}
}

// judgeWorld reads the world again, saves its lines to file in the log
// directory, and prints every line in which it differs from before, each
// marked allowed or not, and the summary (diffSummary) after label. It
// returns the world read, the summary, and the differences not allowed.
func (w *world) judgeWorld(ctx context.Context, before *worldLines, file, label string) (after *worldLines, summary string, notAllowed []string, err error) {
	out := w.out
	if after, err = readWorld(ctx, w, true); err != nil {
		return nil, "", nil, err
	}
	path, err := w.saveLines(file, after.lines)
	if err != nil {
		return nil, "", nil, err
	}
	out.say("    %s (in %s)", lineCounts(after.lines), path)
	diffs := judge(diffLines(before.lines, after.lines), rollbackAllowed)
	for _, d := range diffs {
		out.say("    %s", d)
		if d.allowed == "" {
			notAllowed = append(notAllowed, d.line)
		}
	}
	summary, same := diffSummary(before.lines, diffs)
	summary = label + summary
	mark := "✓"
	if !same {
		mark = "✗"
	}
	out.say("    %s %s", mark, summary)
	return after, summary, notAllowed, nil
}

// effects prints and checks what must not have happened in the world's
// run: an effect repeated (repeated: cloud names carried twice, objects
// created twice; and a pull request with other than one preview and one
// progress comment), a value of secrets, the fixture's tokens or the
// cloud's credentials let out in ferry's logs, the plans repository, the
// comments, the statuses, the Events or the metrics (scanSecrets). It
// returns the problems found.
func (w *world) effects(ctx context.Context, repeated []string, secrets []corev1.Secret) ([]string, error) {
	out := w.out
	var problems []string
	_, comments, texts, err := w.forgeLines(w.prs)
	if err != nil {
		return nil, err
	}
	repeated = slices.Concat(repeated, comments)
	for _, r := range repeated {
		out.say("    ✗ repeated: %s", r)
	}
	if len(repeated) > 0 {
		problems = append(problems, fmt.Sprintf("%d effects repeated", len(repeated)))
	} else {
		out.say("    ✓ no effect repeated: no cloud name carried twice, no object created twice, one preview and one progress comment on each of the %d pull requests", w.prs)
	}
	sc, err := w.scanSecrets(ctx, secrets, nil, texts)
	if err != nil {
		return nil, err
	}
	for _, f := range sc.found {
		out.say("    ✗ secret: %s", f)
	}
	if len(sc.found) > 0 {
		problems = append(problems, fmt.Sprintf("%d secret values let out", len(sc.found)))
	} else {
		out.say("    ✓ no secret value let out: %d values looked for in %d KiB of logs, commits, comments, statuses, Events and metrics", len(sc.values), sc.scanned/1024)
	}
	return problems, nil
}
