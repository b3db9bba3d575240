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

	"github.com/ferry-dev/ferry/internal/openstack/ostest"
	"github.com/ferry-dev/ferry/internal/status"
)

// rollbackSpec is the plan's spec line that undoes every phase; the pull
// request that adds it sets spec.approve to "" as well.
const rollbackSpec = "  rollback: {to: none}\n"

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
// README lists them). Nothing else may differ.
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
	out, phases := w.out, w.sc.phases
	if w.fx.endpoint == nil {
		return fmt.Errorf("scenario %s: its fixture has no endpoint to check during the rollback", w.sc.name)
	}
	n := len(phases) + 1
	out.say("\n==> pull request #%d by alice: roll every phase back (spec.approve: \"\", spec.rollback: {to: none})", n)
	head := w.repo.OpenPR(n, "Roll back "+w.sc.cluster, "alice", map[string]string{w.sc.planPath(): w.fx.plan(`""`, rollbackSpec)})
	preview, err := waitComment(ctx, out, w.gh, n, reconcilerPreviewKey, "the preview comment on #"+fmt.Sprint(n), head[:12])
	if err != nil {
		return err
	}
	out.block(fmt.Sprintf("preview comment on #%d", n), preview)

	out.say("==> bob merges #%d: the merge approves the rollback; the endpoint is checked every %s meanwhile", n, endpointEvery)
	waitCtx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	watch := watchEndpoint(waitCtx, w.fx.endpoint, fail)
	w.repo.MergePR(n, "bob")
	err = waitRolledBack(waitCtx, out, w.reader, w.sc.cluster, phases)
	seen := watch()
	if err != nil {
		return err
	}
	out.say("    %s", seen)
	if seen.longest > outageMax {
		return fmt.Errorf("the endpoint did not answer for %s, more than %s: %s", seen.longest.Round(100*time.Millisecond), outageMax, seen.last)
	}
	// Undone last first: the first phase's row is the last to change.
	want := "| " + phases[0] + " | " + status.PhaseRolledBack.Text() + " |"
	commentCtx, cancel := context.WithTimeout(ctx, commentWait)
	defer cancel()
	progress, err := waitComment(commentCtx, out, w.gh, n, w.sc.progressKey(), "the progress comment on #"+fmt.Sprint(n), want)
	if err != nil {
		return err
	}
	out.block(fmt.Sprintf("progress comment on #%d", n), progress)
	return nil
}

// waitRolledBack waits until the status branch says every phase is
// RolledBack, showing each phase's state; it fails at once when a phase
// failed or the plan is invalid, and after rollbackWait.
func waitRolledBack(ctx context.Context, out *display, reader status.Store, plan string, phases []string) error {
	ctx, cancel := context.WithTimeoutCause(ctx, rollbackWait, fmt.Errorf("the rollback did not end within %s", rollbackWait))
	defer cancel()
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	return out.wait(ctx, "every phase to be rolled back", func() (bool, string) {
		st, err := reader.Read(ctx, plan)
		if err != nil {
			return false, "no status yet"
		}
		done, detail, failed := rollbackProgress(st, phases)
		if failed != nil {
			fail(failed)
		}
		return done, detail
	})
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

// compareWorld reads the world again, prints every line in which it
// differs from before, each marked allowed or not, and a summary, and
// fails when a difference is not allowed, an effect was repeated or a
// secret value was let out.
func (w *world) compareWorld(ctx context.Context, before *worldLines) error {
	out := w.out
	out.say("\n==> comparing the world with how it was before the first pull request")
	after, err := readWorld(ctx, w, true)
	if err != nil {
		return err
	}
	path, err := w.saveLines("world-after.txt", after.lines)
	if err != nil {
		return err
	}
	out.say("    %s (in %s)", lineCounts(after.lines), path)
	diffs := judge(diffLines(before.lines, after.lines), rollbackAllowed)
	for _, d := range diffs {
		out.say("    %s", d)
	}
	summary, same := diffSummary(before.lines, diffs)
	out.say("    %s", summary)

	var problems []string
	if !same {
		problems = append(problems, "the world differs from before the migration beyond what a rollback cannot undo")
	}
	created, err := repeatedCreates(w.fx.cloud.Mgmt.AuditLog)
	if err != nil {
		return err
	}
	_, comments, texts := w.forgeLines(len(w.sc.phases) + 1)
	repeated := slices.Concat(after.repeated, created, comments)
	for _, r := range repeated {
		out.say("    ✗ repeated: %s", r)
	}
	if len(repeated) > 0 {
		problems = append(problems, fmt.Sprintf("%d effects repeated", len(repeated)))
	} else {
		out.say("    ✓ no effect repeated: no cloud name carried twice, no object created twice, one preview and one progress comment per pull request")
	}
	sc, err := w.scanSecrets(slices.Concat(before.secrets, after.secrets), nil, texts)
	if err != nil {
		return err
	}
	for _, f := range sc.found {
		out.say("    ✗ secret: %s", f)
	}
	if len(sc.found) > 0 {
		problems = append(problems, fmt.Sprintf("%d secret values let out", len(sc.found)))
	} else {
		out.say("    ✓ no secret value let out: %d values looked for in %d KiB of logs, commits, comments and statuses", len(sc.values), sc.scanned/1024)
	}
	if len(problems) > 0 {
		return fmt.Errorf("the rollback: %s", strings.Join(problems, "; "))
	}
	return nil
}
