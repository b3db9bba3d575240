// Between two plannings the status follows the steps the reconciler
// publishes and the results executors report; refreshPhase re-derives a
// phase's state from them until the planner next looks.

package status

import (
	"time"

	"github.com/ferry-dev/ferry/internal/step"
)

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
		if st.Rollback == "" {
			advanceApproved(st, s.Phase)
		}
		if ss.State.InFlight() {
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
