package status

import (
	"slices"
	"time"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/step"
)

// ApplyResult records one attempt at a step: its attempts, state, last
// error, message and duration; a step that failed for good fails its
// phase; created resources are recorded for clean-up and a passed probe as
// a check. A result older than the one the step last took (a redelivered
// earlier attempt) changes no step, but its resources and checks are still
// recorded: they happened. Results of unknown steps are added to their
// phase, unless they came before the phase changed direction (Since).
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
	if ss == nil && at.Before(ph.Since) {
		// A step of the phase's earlier direction, its result replayed
		// by a reconciler that took over: Git keeps that history.
		if changed && at.After(st.UpdatedAt) {
			st.UpdatedAt = at
		}
		return
	}
	if ss == nil {
		action, target := ev.Action, ev.Target
		if action == "" || target == "" {
			// A result from before events carried them: the key is
			// all there is.
			action, target = "", ""
			if _, a, t, err := step.ParseKey(ev.StepKey); err == nil {
				action, target = a, t.String()
			}
		}
		ph.Steps = append(ph.Steps, StepStatus{
			Key: ev.StepKey, Executor: ev.Executor, Action: action, Target: target, State: StepPending,
		})
		ph.Left++
		ss = &ph.Steps[len(ph.Steps)-1]
	}
	if ev.Outcome == events.Succeeded && ss.Action == step.Probe {
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
	if f := ph.FirstFailed(); f != nil {
		if ph.State != PhaseFailed {
			ph.Finished = now
		}
		ph.State, ph.Reason = PhaseFailed, failedReason(f)
		return
	}
	running, done := PhaseRunning, PhaseSucceeded
	if ph.Undo {
		running, done = PhaseRollingBack, PhaseRolledBack
	}
	switch {
	case ph.State == PhaseBlocked:
	case ph.Left == 0 && !anyInFlight(ph):
		if ph.State != done {
			ph.Finished = now
		}
		ph.State, ph.Reason = done, ""
	case anyInFlight(ph) || ph.State == PhaseFailed || ph.State == done:
		// Work is in flight, or a failure was cleared or an effect undone
		// by a step published again.
		if ph.State != running {
			ph.Reason = ""
		}
		ph.State, ph.Finished = running, time.Time{}
	case ph.State == PhaseRunning && stopped != "":
		// The last step in flight of a stopped plan finished: nothing
		// more runs until the approval comes back.
		ph.State, ph.Reason = stopped, "stopped: approval moved backwards"
	}
}
