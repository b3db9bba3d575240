package status

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/planner"
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
// Succeeded, unless the planner could not see the phase whole. UpdatedAt becomes now only when something else changed.
func FromResult(prev *PlanStatus, res *planner.Result, revision string, now time.Time) *PlanStatus {
	now = now.UTC().Truncate(time.Second)
	st := &PlanStatus{
		Plan:     res.Plan,
		Revision: revision,
		Approve:  res.Approve,
		Stopped:  res.Stopped,
		Rollback: res.Rollback,
	}
	if prev != nil {
		st.Approved = prev.Approved
		st.ApprovedBy = slices.Clone(prev.ApprovedBy)
		st.Created = slices.Clone(prev.Created)
		st.Checks = slices.Clone(prev.Checks)
		st.UpdatedAt = prev.UpdatedAt
	}
	var before []InventoryItem
	if prev != nil {
		before = prev.Inventory
	}
	st.Inventory = mergeInventory(before, res.Inventory)
	if res.Rollback == "" {
		// A rollback's approval lasts while spec.rollback is set: the
		// next rollback is approved anew.
		st.ApprovedBy = slices.DeleteFunc(st.ApprovedBy, func(a Approval) bool { return strings.HasPrefix(a.Phase, RollbackApproval("")) })
	}
	if res.RolledBack {
		// Nothing after the phase the rollback kept has been acted on
		// any more: approving it again migrates forward.
		st.Approved = ""
		if res.Rollback != v1alpha1.RollbackNone {
			st.Approved = res.Rollback
		}
		// Approving an undone phase again is a new approval.
		for _, rp := range res.Phases {
			if rp.Undo {
				st.ApprovedBy = slices.DeleteFunc(st.ApprovedBy, func(a Approval) bool { return a.Phase == rp.Name })
			}
		}
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
	ph := PhaseStatus{Name: rp.Name, Done: rp.Done, Undo: rp.Undo}
	if old != nil && old.Undo != rp.Undo && (rp.Undo || old.State == PhaseRolledBack) {
		// Rolled back, or going forward after a rollback: a new history.
		old, ph.Since = nil, now
	}
	if old != nil {
		ph.Started, ph.Finished, ph.Since = old.Started, old.Finished, old.Since
	}
	var listed map[string]bool
	ph.Steps, listed = mergeSteps(old, rp, now)
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

// mergeSteps returns the steps of the merged phase, the history first:
// old's steps in their order, then those the planner lists for the first
// time, Pending; and the keys the planner lists. A step of old that the
// planner no longer lists has its effect present: it becomes Succeeded,
// unless the planner's phase is Incomplete (a workload cluster it could
// not reach lists no node steps at all).
func mergeSteps(old *PhaseStatus, rp planner.Phase, now time.Time) ([]StepStatus, map[string]bool) {
	var steps []StepStatus
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
			if !listed[s.Key] && s.State != StepSucceeded && !rp.Incomplete {
				// The planner lists only steps whose effect is absent,
				// unless it could not see them all: then a step it
				// leaves out keeps its state, a failure among them too.
				s.State = StepSucceeded
				if s.Finished.IsZero() {
					s.Finished = now
				}
				if s.Message == "" {
					s.Message = "effect observed"
				}
			}
			steps = append(steps, s)
		}
	}
	return append(steps, fresh...), listed
}

// settlePhase sets the merged phase's state and reason, from the planner's
// state refined by the steps' history (a failure fails it, a step in
// flight or a started runnable phase runs it), and its finish time: kept
// while it stays finished, now when it has just finished, zero otherwise.
func settlePhase(ph, old *PhaseStatus, rp planner.Phase, runnable bool, now time.Time) {
	failed := ph.FirstFailed()
	prevState := PhaseState("")
	if old != nil {
		prevState = old.State
	}
	switch {
	case rp.State == planner.Succeeded:
		ph.State = PhaseSucceeded
	case rp.State == planner.RolledBack:
		ph.State = PhaseRolledBack
	case failed != nil:
		ph.State, ph.Reason = PhaseFailed, failedReason(failed)
	case rp.State == planner.Blocked:
		ph.State, ph.Reason = PhaseBlocked, rp.Reason
	case (anyInFlight(ph) || (runnable && !ph.Started.IsZero())) && rp.Undo:
		ph.State, ph.Reason = PhaseRollingBack, rp.Reason
	case anyInFlight(ph) || (runnable && !ph.Started.IsZero()):
		ph.State, ph.Reason = PhaseRunning, rp.Reason
	default:
		ph.State, ph.Reason = PhaseState(rp.State), rp.Reason
	}
	switch ph.State {
	case PhaseSucceeded, PhaseFailed, PhaseRolledBack:
		if prevState != ph.State || ph.Finished.IsZero() {
			ph.Finished = now
		}
	default:
		ph.Finished = time.Time{}
	}
}

func anyInFlight(ph *PhaseStatus) bool {
	for _, s := range ph.Steps {
		if s.State.InFlight() {
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
