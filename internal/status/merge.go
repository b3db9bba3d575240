package status

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/step"
)

// The merge functions are pure: no clock (the caller passes now, results
// carry their time), no I/O. Applied to the same input twice they give the
// same status, so a reconciler that crashed and replays its input writes
// nothing new.

// FromResult merges a planner result, planned at revision, into the status
// the plan had (prev, nil for none) and returns the new status; prev is not
// changed.
//
// Phase states come from the planner, refined by the step history in prev:
// a phase with a step that failed for good and is still to do is Failed; a
// phase with a step published and not finished, or the runnable phase once
// it started, is Running. Steps keep their history by key. A step of prev
// that the planner no longer lists has its effect present: it is marked
// Succeeded. UpdatedAt becomes now only when something else changed.
func FromResult(prev *PlanStatus, res *planner.Result, revision string, now time.Time) *PlanStatus {
	now = now.UTC().Truncate(time.Second)
	st := &PlanStatus{
		Plan:     res.Plan,
		Revision: revision,
		Approve:  res.Approve,
		Stopped:  res.Stopped,
	}
	if prev != nil {
		st.Approved = prev.Approved
		st.ApprovedBy = slices.Clone(prev.ApprovedBy)
		st.Created = slices.Clone(prev.Created)
		st.Checks = slices.Clone(prev.Checks)
		st.UpdatedAt = prev.UpdatedAt
	}
	for _, rp := range res.Phases {
		var old *PhaseStatus
		if prev != nil {
			old = prev.Phase(rp.Name)
		}
		st.Phases = append(st.Phases, mergePhase(old, rp, rp.Name == res.Runnable, now))
	}
	if prev == nil || !sameContent(prev, st) {
		st.UpdatedAt = now
	}
	return st
}

// mergePhase merges the planner's view of one phase into its history.
func mergePhase(old *PhaseStatus, rp planner.Phase, runnable bool, now time.Time) PhaseStatus {
	ph := PhaseStatus{Name: rp.Name, Done: rp.Done}
	if old != nil {
		ph.Started, ph.Finished = old.Started, old.Finished
	}
	listed := map[string]bool{}
	var fresh []StepStatus
	for _, g := range rp.Groups {
		for _, s := range g.Steps {
			listed[s.Key] = true
			if old == nil || old.Step(s.Key) == nil {
				fresh = append(fresh, StepStatus{
					Key: s.Key, Executor: s.Executor, Action: s.Action,
					Target: s.Target.String(), State: StepPending,
				})
			}
		}
	}
	if old != nil {
		for _, s := range old.Steps {
			if !listed[s.Key] && s.State != StepSucceeded {
				// The planner lists only steps whose effect is absent.
				s.State = StepSucceeded
				if s.Finished.IsZero() {
					s.Finished = now
				}
				if s.Message == "" {
					s.Message = "effect observed"
				}
			}
			ph.Steps = append(ph.Steps, s)
		}
	}
	ph.Steps = append(ph.Steps, fresh...)
	for _, s := range ph.Steps {
		if !listed[s.Key] {
			continue
		}
		// A step reported Succeeded that the observer has not caught up
		// with yet stays Succeeded: results are facts too.
		if s.State == StepSucceeded {
			ph.Done++
		} else {
			ph.Left++
		}
	}

	settlePhase(&ph, old, rp, runnable, now)
	return ph
}

// settlePhase sets a merged phase's state from the planner's and its
// steps' results (a failed step fails the phase, a step in flight runs
// it) and stamps when it finished.
func settlePhase(ph *PhaseStatus, old *PhaseStatus, rp planner.Phase, runnable bool, now time.Time) {

	failed := firstFailed(ph)
	prevState := PhaseState("")
	if old != nil {
		prevState = old.State
	}
	switch {
	case rp.State == planner.Succeeded:
		ph.State = PhaseSucceeded
	case failed != nil:
		ph.State, ph.Reason = PhaseFailed, failedReason(failed)
	case rp.State == planner.Blocked:
		ph.State, ph.Reason = PhaseBlocked, rp.Reason
	case anyInFlight(ph) || (runnable && !ph.Started.IsZero()):
		ph.State, ph.Reason = PhaseRunning, rp.Reason
	default:
		ph.State, ph.Reason = PhaseState(rp.State), rp.Reason
	}
	switch {
	case ph.State == PhaseSucceeded || ph.State == PhaseFailed:
		if prevState != ph.State || ph.Finished.IsZero() {
			ph.Finished = now
		}
	default:
		ph.Finished = time.Time{}
	}
}

// Published marks steps as published at now: Running, and their phases
// Running. Call it for the group the reconciler publishes, after
// FromResult. It moves Approved forward: publishing is acting on a phase.
// A step already in flight keeps its start time.
func Published(st *PlanStatus, steps []step.Step, now time.Time) {
	now = now.UTC().Truncate(time.Second)
	changed := false
	for _, s := range steps {
		ph := phaseFor(st, s.Phase)
		ss := ph.Step(s.Key)
		if ss == nil {
			ph.Steps = append(ph.Steps, StepStatus{
				Key: s.Key, Executor: s.Executor, Action: s.Action,
				Target: s.Target.String(), State: StepPending,
			})
			ph.Left++
			ss = &ph.Steps[len(ph.Steps)-1]
		}
		advanceApproved(st, s.Phase)
		if ss.State.inFlight() {
			continue
		}
		if ss.State == StepSucceeded {
			ph.Done, ph.Left = max(ph.Done-1, 0), ph.Left+1
		}
		ss.State, ss.Started, ss.Finished = StepRunning, now, time.Time{}
		if ph.Started.IsZero() {
			ph.Started = now
		}
		changed = true
		refreshPhase(ph, stoppedState(st, ph.Name), now)
	}
	if changed && now.After(st.UpdatedAt) {
		st.UpdatedAt = now
	}
}

// SetApproval records who approved a phase, replacing an earlier approval
// of it; approvals stay in phase order.
func SetApproval(st *PlanStatus, a Approval) {
	order := func(phase string) int {
		for i, p := range st.Phases {
			if p.Name == phase {
				return i
			}
		}
		return len(st.Phases)
	}
	st.ApprovedBy = slices.DeleteFunc(st.ApprovedBy, func(x Approval) bool { return x.Phase == a.Phase })
	st.ApprovedBy = append(st.ApprovedBy, a)
	slices.SortStableFunc(st.ApprovedBy, func(x, y Approval) int { return order(x.Phase) - order(y.Phase) })
}

// Record is what the planner needs back from the status: the furthest
// phase acted on, and the checks that passed.
func Record(st *PlanStatus) observed.Record {
	if st == nil {
		return observed.Record{}
	}
	return observed.Record{Approved: st.Approved, Checks: slices.Clone(st.Checks)}
}

// phaseFor returns the named phase, adding it (Running, at the end) when a
// step or result names a phase the planner did not list.
func phaseFor(st *PlanStatus, name string) *PhaseStatus {
	if ph := st.Phase(name); ph != nil {
		return ph
	}
	st.Phases = append(st.Phases, PhaseStatus{Name: name, State: PhaseRunning})
	return &st.Phases[len(st.Phases)-1]
}

// advanceApproved moves Approved to phase when phase comes later; a phase
// the status does not list counts only when nothing was approved yet.
func advanceApproved(st *PlanStatus, phase string) {
	if st.Approved == "" || phaseIndex(st, phase) > phaseIndex(st, st.Approved) {
		st.Approved = phase
	}
}

// stoppedState is what the planner calls a phase of a stopped plan:
// Pending after the approved phase, Approved up to it; empty when the plan
// did not stop.
func stoppedState(st *PlanStatus, phase string) PhaseState {
	switch {
	case st.Stopped == "":
		return ""
	case phaseIndex(st, phase) > phaseIndex(st, st.Approve):
		return PhasePending
	}
	return PhaseApproved
}

// phaseIndex is the position of a phase in the status, -1 when absent.
func phaseIndex(st *PlanStatus, name string) int {
	for i, p := range st.Phases {
		if p.Name == name {
			return i
		}
	}
	return -1
}

func firstFailed(ph *PhaseStatus) *StepStatus {
	for i := range ph.Steps {
		if ph.Steps[i].State == StepFailed {
			return &ph.Steps[i]
		}
	}
	return nil
}

func anyInFlight(ph *PhaseStatus) bool {
	for _, s := range ph.Steps {
		if s.State.inFlight() {
			return true
		}
	}
	return false
}

func failedReason(s *StepStatus) string {
	if s.LastError == "" {
		return "step " + s.Key + " failed"
	}
	return "step " + s.Key + " failed: " + s.LastError
}

// splitKey reads the action and target of a step key
// (phase/action/kind/name), for a result of a step the status never listed.
func splitKey(key string) (action, target string) {
	parts := strings.SplitN(key, "/", 4)
	if len(parts) < 4 {
		return "", ""
	}
	return parts[1], parts[2] + " " + parts[3]
}

// Same reports whether two statuses say the same, apart from when they
// were updated: a status that is the Same as the one written need not be
// written again.
func Same(a, b *PlanStatus) bool { return sameContent(a, b) }

// sameContent reports whether two statuses say the same, apart from
// UpdatedAt.
func sameContent(a, b *PlanStatus) bool {
	x, y := *a, *b
	x.UpdatedAt, y.UpdatedAt = time.Time{}, time.Time{}
	jx, err1 := json.Marshal(&x)
	jy, err2 := json.Marshal(&y)
	return err1 == nil && err2 == nil && string(jx) == string(jy)
}

// MarkInvalid records that the plan's file failed validation at revision:
// problems are its "file:line: field: message" lines. The phases keep
// what they were; FromResult clears Invalid once the file is valid again.
func MarkInvalid(st *PlanStatus, revision string, problems []string, now time.Time) {
	if st.Revision == revision && slices.Equal(st.Invalid, problems) {
		return
	}
	st.Revision, st.Invalid = revision, slices.Clone(problems)
	st.UpdatedAt = now.UTC().Truncate(time.Second)
}

// MarkUnobserved records that the plan's live state could not be read at
// revision, and why. It reports whether the status changed; FromResult
// clears it once a cycle reads the state again.
func MarkUnobserved(st *PlanStatus, revision, why string, now time.Time) bool {
	if st.Revision == revision && st.Unobserved == why {
		return false
	}
	st.Revision, st.Unobserved = revision, why
	st.UpdatedAt = now.UTC().Truncate(time.Second)
	return true
}
