package reconciler

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ferry-dev/ferry/internal/clusterevents"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/planfile"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/redact"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/status/render"
	"github.com/ferry-dev/ferry/internal/step"
)

// StatusStore keeps plan statuses (status/<plan>.yaml on the status branch).
type StatusStore interface {
	Write(ctx context.Context, statuses []*status.PlanStatus) (commit string, err error)
	ReadAll(ctx context.Context) ([]*status.PlanStatus, error)
}

// Approvals finds who approved a plan's phase: the merger of the pull
// request whose merge raised spec.approve to it, or the commit's author.
type Approvals interface {
	Find(ctx context.Context, revision, file, phase string) (status.Approval, error)
}

// StatusRecorder is the loop's Recorder: it keeps each plan's status,
// writes all changed statuses in one commit per cycle, and mirrors them to
// the approving pull request (one progress comment per plan, edited in
// place) and to commit statuses, when a forge is configured.
type StatusRecorder struct {
	Store     StatusStore
	Forge     forge.Forge // nil: no pull-request write-back
	Approvals Approvals   // nil: approvers are not looked up
	// StatusURL links the full status from a truncated comment.
	StatusURL string
	Metrics   *Metrics
	// Events, when set, is told of each phase transition and each step
	// that failed for good, for Events on the plan's Cluster.
	Events ClusterEvents
	// NoteAfter is how long the status writes may fail before the pull
	// requests' comments say so (DefaultNoteAfter when 0).
	NoteAfter time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	// failingSince is when the status writes began to fail; zero while
	// the last one succeeded. Only Flush, which runs alone, uses it.
	failingSince time.Time

	mu       sync.Mutex
	statuses map[string]*status.PlanStatus
	dirty    map[string]bool
	// clusters are the plans' Clusters ("namespace/name") as last planned;
	// reported what Events were last told of each plan.
	clusters map[string]string
	reported map[string]clusterevents.Marks
}

var _ Recorder = (*StatusRecorder)(nil)

func (r *StatusRecorder) init() {
	if r.statuses == nil {
		r.statuses, r.dirty = map[string]*status.PlanStatus{}, map[string]bool{}
		r.clusters, r.reported = map[string]string{}, map[string]clusterevents.Marks{}
	}
}

// Restore loads the recorded statuses and hands the loop what it needs of
// them (the furthest phase acted on, passed checks).
func (r *StatusRecorder) Restore(ctx context.Context, l *Loop) error {
	all, err := r.Store.ReadAll(ctx)
	if err != nil {
		return fmt.Errorf("read recorded statuses: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.init()
	for _, st := range all {
		r.statuses[st.Plan] = st
		// Dirty: the process before this one may have ended (a kill, a
		// crash) between committing the status and mirroring it. The
		// first Flush writes it again, which commits nothing when it is
		// unchanged, and mirrors it; the forge skips a comment that is
		// already so.
		r.dirty[st.Plan] = true
		r.reported[st.Plan] = clusterevents.MarksOf(st)
		l.Restore(st.Plan, status.Record(st))
	}
	return nil
}

// Planned merges the planner's view into the plan's status.
func (r *StatusRecorder) Planned(ctx context.Context, cycle Cycle, file, plan string, res *planner.Result, published []step.Step) {
	r.mu.Lock()
	r.init()
	prev := r.statuses[plan]
	st := status.FromResult(prev, res, cycle.Revision, cycle.At)
	status.Published(st, published, cycle.At)
	r.statuses[plan] = st
	r.clusters[plan] = res.Cluster
	if prev == nil || !status.Same(prev, st) {
		r.dirty[plan] = true // unchanged statuses are not written or mirrored again
	}
	need := missingApprovals(st, res)
	if r.Approvals == nil {
		need = nil
	}
	r.mu.Unlock()

	for _, phase := range need {
		a, err := r.Approvals.Find(ctx, cycle.Revision, file, phase)
		if err != nil {
			logging.From(ctx).Warn("could not tell who approved a phase", "plan", plan, "phase", phase, "error", err)
			continue
		}
		r.mu.Lock()
		status.SetApproval(r.statuses[plan], a)
		r.dirty[plan] = true
		r.mu.Unlock()
	}
	// Last: the Events name the approver, found just now for a phase
	// that starts.
	r.mu.Lock()
	r.reportLocked(ctx, plan)
	r.mu.Unlock()
}

// missingApprovals lists the approved phases that have no approver yet.
func missingApprovals(st *status.PlanStatus, res *planner.Result) []string {
	want := st.Approving()
	if want == "" {
		return nil
	}
	for _, a := range st.ApprovedBy {
		if a.Phase == want {
			return nil
		}
	}
	return []string{want}
}

// Invalid records the problems of a plan file that failed validation on
// the plan it held (a file never valid has no plan, hence no status; its
// pull request's preview showed the errors).
func (r *StatusRecorder) Invalid(ctx context.Context, cycle Cycle, file, plan string, problems planfile.Errors) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.init()
	lines := make([]string, len(problems))
	for i, p := range problems {
		// A plan file's problem may quote what is in it: a URL with a
		// password, clouds.yaml pasted into a field.
		lines[i] = redact.Scrub(p.Error())
		logging.From(ctx).Warn("invalid plan", "revision", short(cycle.Revision), "file", file, "plan", plan, "problem", lines[i])
	}
	st := r.statuses[plan]
	if plan == "" || st == nil {
		return
	}
	status.MarkInvalid(st, cycle.Revision, lines, cycle.At)
	r.dirty[plan] = true
}

// Unobserved records on a plan's status why its live state could not be
// read; the next cycle that reads it clears it.
func (r *StatusRecorder) Unobserved(_ context.Context, cycle Cycle, _, plan string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.init()
	st := r.statuses[plan]
	if st == nil {
		st = &status.PlanStatus{Plan: plan}
		r.statuses[plan] = st
	}
	if status.MarkUnobserved(st, cycle.Revision, redact.Scrub(err.Error()), cycle.At) {
		r.dirty[plan] = true
	}
}

// Removed marks a plan stopped because its file left the branch.
func (r *StatusRecorder) Removed(_ context.Context, cycle Cycle, plan string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.init()
	if st := r.statuses[plan]; st != nil {
		st.Stopped = "the plan file was removed from the branch at " + short(cycle.Revision) + ": the migration stopped before its next step; nothing was rolled back"
		r.dirty[plan] = true
	}
}

// Result merges a step result into its plan's status. The result's error
// and message are scrubbed first (redact.Scrub): an executor's error may
// quote what a server echoed of its request, and from here it reaches the
// status file, the comment, the Events and the status endpoint.
func (r *StatusRecorder) Result(ctx context.Context, ev *events.ResultEvent) {
	ev = scrubResult(ev)
	if r.Metrics != nil {
		r.Metrics.ObserveResult(ev)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.init()
	st := r.statuses[ev.Plan]
	if st == nil {
		st = &status.PlanStatus{Plan: ev.Plan, Revision: ev.Revision}
		r.statuses[ev.Plan] = st
	}
	status.ApplyResult(st, ev)
	r.dirty[ev.Plan] = true
	r.reportLocked(ctx, ev.Plan)
}

// Flush writes the changed statuses in one commit, then updates comments
// and commit statuses (the forge client coalesces and retries them without
// blocking).
func (r *StatusRecorder) Flush(ctx context.Context, cycle Cycle) error {
	r.mu.Lock()
	r.init()
	// Copies: results keep changing the live statuses while these are
	// written and mirrored outside the lock.
	var changed []*status.PlanStatus
	for plan := range r.dirty {
		changed = append(changed, r.statuses[plan].Clone())
	}
	sort.Slice(changed, func(i, j int) bool { return changed[i].Plan < changed[j].Plan })
	r.dirty = map[string]bool{}
	if r.Metrics != nil {
		r.Metrics.ObservePhases(r.statuses)
	}
	r.mu.Unlock()
	if len(changed) == 0 {
		return nil
	}
	for _, st := range changed {
		scrubStatus(st)
	}
	began := time.Now()
	commit, err := r.Store.Write(ctx, changed)
	if err != nil {
		r.mu.Lock()
		for _, st := range changed {
			r.dirty[st.Plan] = true // try again next cycle
		}
		r.mu.Unlock()
		r.unrecorded(ctx, changed, err)
		return err
	}
	r.failingSince = time.Time{}
	if commit != "" {
		logging.From(ctx).Info("status committed", "commit", short(commit), "plans", len(changed), "took", time.Since(began).Round(time.Millisecond))
	}
	if r.Forge != nil {
		for _, st := range changed {
			r.mirror(ctx, st, "")
		}
	}
	return nil
}

// DefaultNoteAfter is how long the status writes may fail before the pull
// requests say so: long enough for a push retried over a short outage,
// and before the FerryStatusNotRecorded alert (ten minutes).
const DefaultNoteAfter = 5 * time.Minute

// unrecorded notes on the pull requests, once the status writes have
// failed for NoteAfter, that the statuses changed are not in Git: the
// migration goes on, and a team that reads only the pull request would
// otherwise see it stand still. The note stays until a write succeeds
// (the next mirror has none); a note that did not change is not sent
// again (the forge skips an unchanged comment).
func (r *StatusRecorder) unrecorded(ctx context.Context, changed []*status.PlanStatus, err error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	if r.failingSince.IsZero() {
		r.failingSince = now()
	}
	after := r.NoteAfter
	if after == 0 {
		after = DefaultNoteAfter
	}
	if r.Forge == nil || now().Sub(r.failingSince) < after {
		return
	}
	note := fmt.Sprintf("> [!WARNING]\n> ferry has not been able to record the status on its status branch since %s: %s. The migration goes on; what follows is what ferry knows, which Git does not hold yet. ferry keeps trying (docs/troubleshooting.md).\n\n",
		r.failingSince.UTC().Format("2006-01-02 15:04 MST"), strings.Join(strings.Fields(redact.Scrub(err.Error())), " "))
	for _, st := range changed {
		r.mirror(ctx, st, note)
	}
}

// scrubResult returns ev, or a copy of it with its error and message
// scrubbed when they hold something to scrub; ev itself is not changed
// (the caller may keep it).
func scrubResult(ev *events.ResultEvent) *events.ResultEvent {
	errText, msg := redact.Scrub(ev.Error), redact.Scrub(ev.Report.Message)
	if errText == ev.Error && msg == ev.Report.Message {
		return ev
	}
	clean := *ev
	clean.Error, clean.Report.Message = errText, msg
	return &clean
}

// scrubStatus scrubs, in place, every field of a status that holds text
// from outside the plan: results' errors and messages, phases' reasons,
// why the plan stopped, was invalid or unobserved. It is the last pass
// before a status leaves the process (the status file, the comment), on
// the copies Flush writes: what Result, Invalid and Unobserved scrubbed on
// the way in does not change again, and a reason the planner wrote from
// what it observed is scrubbed here.
func scrubStatus(st *status.PlanStatus) {
	st.Stopped = redact.Scrub(st.Stopped)
	st.Unobserved = redact.Scrub(st.Unobserved)
	for i := range st.Invalid {
		st.Invalid[i] = redact.Scrub(st.Invalid[i])
	}
	for i := range st.Phases {
		ph := &st.Phases[i]
		ph.Reason = redact.Scrub(ph.Reason)
		for j := range ph.Steps {
			ph.Steps[j].LastError = redact.Scrub(ph.Steps[j].LastError)
			ph.Steps[j].Message = redact.Scrub(ph.Steps[j].Message)
		}
	}
}

// mirror shows a plan's status on the pull request that approved its
// current phase, under note (when not ""), and as commit statuses on that
// approval's commit.
func (r *StatusRecorder) mirror(ctx context.Context, st *status.PlanStatus, note string) {
	for _, a := range st.ApprovedBy {
		if a.Phase != st.Approving() {
			continue
		}
		if a.PR > 0 {
			body := forge.Comment("progress/"+st.Plan, "", note+render.Markdown(st, forge.MaxCommentLength-2048, r.StatusURL))
			if err := r.Forge.UpsertComment(ctx, a.PR, "progress/"+st.Plan, body); err != nil {
				logging.From(ctx).Warn("progress comment not updated", "plan", st.Plan, "pr", a.PR, "error", err)
			}
		}
		if a.Commit == "" {
			continue
		}
		for _, ph := range st.Phases {
			state, ok := commitState(ph.State)
			if !ok {
				continue
			}
			desc := fmt.Sprintf("%s: %s (%d done, %d left)", ph.Name, ph.State.Text(), ph.Done, ph.Left)
			if err := r.Forge.SetStatus(ctx, a.Commit, "ferry/"+st.Plan+"/"+ph.Name, state, desc, r.StatusURL); err != nil {
				logging.From(ctx).Warn("commit status not set", "plan", st.Plan, "phase", ph.Name, "error", err)
			}
		}
	}
}

// commitState maps a phase state to a commit status; pending phases that
// are not approved get none.
func commitState(s status.PhaseState) (string, bool) {
	switch s {
	case status.PhaseSucceeded, status.PhaseRolledBack:
		return forge.StateSuccess, true
	case status.PhaseFailed, status.PhaseBlocked:
		return forge.StateFailure, true
	case status.PhaseApproved, status.PhaseRunning, status.PhaseRollingBack:
		return forge.StatePending, true
	}
	return "", false
}

// Statuses returns a copy of every plan's current status, by plan name.
func (r *StatusRecorder) Statuses() []*status.PlanStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*status.PlanStatus, 0, len(r.statuses))
	for _, name := range slices.Sorted(maps.Keys(r.statuses)) {
		out = append(out, r.statuses[name].Clone())
	}
	return out
}

// Status returns a copy of a plan's current status (for tests and the
// status endpoint), or nil.
func (r *StatusRecorder) Status(plan string) *status.PlanStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st, ok := r.statuses[plan]; ok {
		return st.Clone()
	}
	return nil
}
