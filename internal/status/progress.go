// Between two plannings the status follows the steps the reconciler
// publishes and the results executors report; refreshPhase re-derives a
// phase's state from them until the planner next looks.

package status

import (
	"slices"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/planner"
)

// Published marks steps as published at now: Running, and their phases
// Running. Call it for the group the reconciler publishes, after
// FromResult. It moves Approved forward: publishing is acting on a phase.
// A step already in flight keeps its start time.
func Published(st *PlanStatus, steps []planner.Step, now time.Time) {
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

// ApplyResult records one attempt at a step: its attempts, state, last
// error, message and duration; a step that failed for good fails its
// phase; created resources are recorded for clean-up and a passed probe as
// a check. A result older than the one the step last took (a redelivered
// earlier attempt) changes no step, but its resources and checks are still
// recorded: they happened. Results of unknown steps are added to their
// phase.
func ApplyResult(st *PlanStatus, ev *events.ResultEvent) {
	at := ev.At.UTC().Truncate(time.Second)
	changed := false
	for _, r := range ev.Created {
		if !slices.Contains(st.Created, r) {
			st.Created = append(st.Created, r)
			changed = true
		}
	}
	ph := phaseFor(st, ev.Phase)
	ss := ph.Step(ev.StepKey)
	if ss == nil {
		action, target := splitKey(ev.StepKey)
		if ev.Action != "" && ev.Target != "" {
			action, target = ev.Action, ev.Target
		}
		ph.Steps = append(ph.Steps, StepStatus{
			Key: ev.StepKey, Executor: ev.Executor, Action: action, Target: target, State: StepPending,
		})
		ph.Left++
		ss = &ph.Steps[len(ph.Steps)-1]
	}
	if ev.Outcome == events.Succeeded && ss.Action == "probe" {
		if i, found := slices.BinarySearch(st.Checks, ev.StepKey); !found {
			st.Checks = slices.Insert(st.Checks, i, ev.StepKey)
			changed = true
		}
	}
	stale := at.Before(ss.LastResult) ||
		(at.Equal(ss.LastResult) && ev.Revision == ss.Revision && ev.Attempt < ss.Attempts)
	if !stale {
		before := *ss
		advanceApproved(st, ev.Phase)
		applyStep(ph, ss, ev, at)
		if *ss != before {
			changed = true
			refreshPhase(ph, stoppedState(st, ph.Name), at)
		}
	}
	if changed && at.After(st.UpdatedAt) {
		st.UpdatedAt = at
	}
}

// applyStep takes one result into a step, keeping Done and Left in step.
func applyStep(ph *PhaseStatus, ss *StepStatus, ev *events.ResultEvent, at time.Time) {
	wasDone := ss.State == StepSucceeded
	ss.Attempts, ss.Revision, ss.LastResult = ev.Attempt, ev.Revision, at
	ss.Duration = Duration(ev.Duration.Round(time.Millisecond))
	if ss.Started.IsZero() {
		ss.Started = ev.At.Add(-ev.Duration).UTC().Truncate(time.Second)
	}
	if ev.Error != "" {
		ss.LastError = ev.Error
	}
	if ev.Message != "" {
		ss.Message = ev.Message
	}
	switch {
	case ev.Outcome == events.Succeeded:
		ss.State, ss.Finished = StepSucceeded, at
	case ev.Outcome == events.Failed || ev.Terminal:
		ss.State, ss.Finished = StepFailed, at
	default:
		ss.State, ss.Finished = StepRetrying, time.Time{}
	}
	switch isDone := ss.State == StepSucceeded; {
	case isDone && !wasDone:
		ph.Done, ph.Left = ph.Done+1, max(ph.Left-1, 0)
	case !isDone && wasDone:
		ph.Done, ph.Left = max(ph.Done-1, 0), ph.Left+1
	}
	if ph.Started.IsZero() || ss.Started.Before(ph.Started) {
		ph.Started = ss.Started
	}
}

// refreshPhase re-derives a phase's state after one of its steps changed,
// between two plannings: a failure fails it, a step in flight makes it
// Running, and the last step done with nothing left makes it Succeeded. A
// Blocked phase stays Blocked, and an Approved or Pending one keeps its
// state and reason, until the planner says otherwise. stopped is the state
// a phase of a stopped plan falls back to when nothing is in flight (see
// stoppedState); empty when the plan did not stop.
func refreshPhase(ph *PhaseStatus, stopped PhaseState, now time.Time) {
	if f := firstFailed(ph); f != nil {
		if ph.State != PhaseFailed {
			ph.Finished = now
		}
		ph.State, ph.Reason = PhaseFailed, failedReason(f)
		return
	}
	switch {
	case ph.State == PhaseBlocked:
	case ph.Left == 0 && !anyInFlight(ph):
		if ph.State != PhaseSucceeded {
			ph.Finished = now
		}
		ph.State, ph.Reason = PhaseSucceeded, ""
	case anyInFlight(ph) || ph.State == PhaseFailed || ph.State == PhaseSucceeded:
		// Work is in flight, or a failure was cleared or an effect undone
		// by a step published again.
		if ph.State != PhaseRunning {
			ph.Reason = ""
		}
		ph.State, ph.Finished = PhaseRunning, time.Time{}
	case ph.State == PhaseRunning && stopped != "":
		// The last step in flight of a stopped plan finished: nothing
		// more runs until the approval comes back.
		ph.State, ph.Reason = stopped, "stopped: approval moved backwards"
	}
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

// splitKey reads the action and target of a step key
// (phase/action/kind/name), for a result of a step the status never listed.
func splitKey(key string) (action, target string) {
	parts := strings.SplitN(key, "/", 4)
	if len(parts) < 4 {
		return "", ""
	}
	return parts[1], parts[2] + " " + parts[3]
}
