package clusterevents

import (
	"fmt"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	"github.com/ferry-dev/ferry/internal/redact"
	"github.com/ferry-dev/ferry/internal/status"
)

// Component is the event source ferry's reconciler writes as (the From
// column of `kubectl describe`).
const Component = "ferry-reconciler"

// Reasons of ferry's Events: one per phase state (Phase + the state's
// name, as status files and metrics spell it), and StepFailed. Alerts
// switch on them.
const (
	ReasonPhasePending     = "PhasePending"
	ReasonPhaseApproved    = "PhaseApproved"
	ReasonPhaseRunning     = "PhaseRunning"
	ReasonPhaseSucceeded   = "PhaseSucceeded"
	ReasonPhaseFailed      = "PhaseFailed"
	ReasonPhaseBlocked     = "PhaseBlocked"
	ReasonPhaseRollingBack = "PhaseRollingBack"
	ReasonPhaseRolledBack  = "PhaseRolledBack"
	ReasonStepFailed       = "StepFailed"
)

// Event is one Kubernetes Event to write on a plan's Cluster.
type Event struct {
	// Type is corev1.EventTypeNormal for progress, EventTypeWarning for
	// what needs a person (a failure, a block).
	Type    string
	Reason  string
	Message string
}

// Marks are what a plan's Events last reported: each phase's state and the
// steps that had failed for good. The zero Marks reported nothing: every
// phase counts as Pending.
type Marks struct {
	phases map[string]status.PhaseState
	failed map[string]bool // step keys
}

// MarksOf returns the Marks of a status, to compare the next one with.
func MarksOf(st *status.PlanStatus) Marks {
	m := Marks{phases: map[string]status.PhaseState{}, failed: map[string]bool{}}
	if st == nil {
		return m
	}
	for _, ph := range st.Phases {
		m.phases[ph.Name] = ph.State
		for _, s := range ph.Steps {
			if s.State == status.StepFailed {
				m.failed[s.Key] = true
			}
		}
	}
	return m
}

// Transitions returns the Events that say how st differs from what prev
// reported, in phase order: a StepFailed for each step that failed for
// good since, then a Phase<State> for each phase whose state changed. A
// phase prev does not know counts as Pending, so that a new plan's
// Pending phases say nothing. The messages name no count or time that
// changes between two equal transitions, so that client-go's correlator
// counts a repeated one on the Event it wrote first.
func Transitions(prev Marks, st *status.PlanStatus) []Event {
	var out []Event
	for _, ph := range st.Phases {
		for _, s := range ph.Steps {
			if s.State == status.StepFailed && !prev.failed[s.Key] {
				out = append(out, stepFailed(ph.Name, s))
			}
		}
		was, ok := prev.phases[ph.Name]
		if !ok {
			was = status.PhasePending
		}
		if ph.State != was {
			out = append(out, phaseEvent(st, ph))
		}
	}
	return out
}

// phaseEvent is the Event of a phase that entered its state:
// "Phase cluster is running (approved by bob in #1)", with the phase's
// reason after a colon when it has one.
func phaseEvent(st *status.PlanStatus, ph status.PhaseStatus) Event {
	ev := Event{Type: corev1.EventTypeNormal, Reason: "Phase" + string(ph.State)}
	var verb string
	switch ph.State {
	case status.PhaseSucceeded:
		verb = "succeeded"
	case status.PhaseFailed:
		verb, ev.Type = "failed", corev1.EventTypeWarning
	case status.PhaseBlocked:
		verb, ev.Type = "is blocked", corev1.EventTypeWarning
	case status.PhaseRolledBack:
		verb = "was rolled back"
	default: // Pending, Approved, Running, RollingBack
		verb = "is " + strings.ToLower(ph.State.Text())
	}
	msg := "Phase " + ph.Name + " " + verb
	if a := approvalOf(st, ph); a != "" {
		msg += " (" + a + ")"
	}
	if ph.Reason != "" {
		msg += ": " + ph.Reason
	}
	ev.Message = clean(msg)
	return ev
}

// stepFailed is the Event of a step that failed for good.
func stepFailed(phase string, s status.StepStatus) Event {
	msg := "Step " + s.Title() + " of phase " + phase + " failed"
	if s.LastError != "" {
		msg += ": " + s.LastError
	}
	return Event{Type: corev1.EventTypeWarning, Reason: ReasonStepFailed, Message: clean(msg)}
}

// approvalOf says who approved the phase: "approved by bob in #1". A
// phase is approved by the first approval that covered it (spec.approve
// approves every phase up to the one it names, and only that one's
// approver is recorded); a phase a rollback undoes, by the rollback's.
// Empty when the status does not know.
func approvalOf(st *status.PlanStatus, ph status.PhaseStatus) string {
	if ph.Undo {
		for _, a := range st.ApprovedBy {
			if st.Rollback != "" && a.Phase == status.RollbackApproval(st.Rollback) {
				return "rollback to " + st.Rollback + " " + approvedBy(a)
			}
		}
		return ""
	}
	at := phaseIndex(st, ph.Name)
	for _, a := range st.ApprovedBy {
		if i := phaseIndex(st, a.Phase); i >= 0 && i >= at {
			return approvedBy(a)
		}
	}
	return ""
}

func approvedBy(a status.Approval) string {
	switch {
	case a.PR > 0:
		return fmt.Sprintf("approved by %s in #%d", a.By, a.PR)
	case a.Commit != "":
		return fmt.Sprintf("approved by %s in commit %.12s", a.By, a.Commit)
	}
	return "approved by " + a.By
}

func phaseIndex(st *status.PlanStatus, name string) int {
	for i, p := range st.Phases {
		if p.Name == name {
			return i
		}
	}
	return -1
}

// maxMessage bounds a message: events.k8s.io caps notes at 1 kB, and a
// `kubectl describe` table is no place for a whole stack of errors.
const maxMessage = 1024

// clean makes a message fit for an Event: a status holds no secret's
// value by construction (it is built from plans and results), but an
// executor's error may quote a URL or what a server echoed, and an Event
// is readable by anyone who may list events in the namespace, so the
// message is scrubbed (redact.Scrub: registered secrets, URLs' user
// information and query strings); long messages are cut, after the
// scrub, so that a cut cannot leave part of a secret it would have
// recognised.
func clean(msg string) string {
	msg = redact.Scrub(msg)
	if len(msg) <= maxMessage {
		return msg
	}
	cut := maxMessage - len("…")
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "…"
}
