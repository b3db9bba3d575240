package status

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/step"
)

// PhaseState is where a phase stands: the planner's view (Pending,
// Approved, Succeeded, Blocked) refined by the executors' results (Running,
// Failed).
type PhaseState string

const (
	// PhasePending: not approved; nothing of it runs.
	PhasePending PhaseState = "Pending"
	// PhaseApproved: approved with steps left, and not started or not
	// runnable now (Reason says why).
	PhaseApproved PhaseState = "Approved"
	// PhaseRunning: a step of it is published and not finished, or it is
	// the runnable phase and has started.
	PhaseRunning PhaseState = "Running"
	// PhaseSucceeded: every step's effect is present.
	PhaseSucceeded PhaseState = "Succeeded"
	// PhaseFailed: a step failed for good; a person must look.
	PhaseFailed PhaseState = "Failed"
	// PhaseBlocked: a health check failed or the input is incomplete;
	// Reason says which.
	PhaseBlocked PhaseState = "Blocked"
	// PhaseRollingBack: spec.rollback undoes the phase, and a step of
	// its undo is published and not finished.
	PhaseRollingBack PhaseState = "RollingBack"
	// PhaseRolledBack: spec.rollback undid the phase: nothing of it is
	// left.
	PhaseRolledBack PhaseState = "RolledBack"
)

// Text is the state as people read it in comments and commit statuses:
// "Rolling back" and "Rolled back" for a rollback's states, the state's
// name otherwise (tables and files keep the names, for scripts).
func (s PhaseState) Text() string {
	switch s {
	case PhaseRollingBack:
		return "Rolling back"
	case PhaseRolledBack:
		return "Rolled back"
	}
	return string(s)
}

// StepState is where a step stands.
type StepState string

const (
	// StepPending: planned, not published yet.
	StepPending StepState = "Pending"
	// StepRunning: published, no result yet.
	StepRunning StepState = "Running"
	// StepRetrying: an attempt failed with a retryable error; the step is
	// redelivered after a back-off.
	StepRetrying StepState = "Retrying"
	// StepSucceeded: the step's effect is present.
	StepSucceeded StepState = "Succeeded"
	// StepFailed: the step failed for good.
	StepFailed StepState = "Failed"
)

// InFlight reports whether a step is published and not finished.
func (s StepState) InFlight() bool { return s == StepRunning || s == StepRetrying }

// PlanStatus is one plan's status: what `reconciler status` prints, what PR
// comments show and what status/<plan>.yaml holds. It is built only from
// the planner's Result and the executors' ResultEvents, which never hold a
// secret's value, so neither does it. The field order is the order of the
// YAML and JSON documents.
type PlanStatus struct {
	// Plan is the plan's name (metadata.name).
	Plan string `json:"plan"`
	// Revision is the Git revision the plan was last planned from.
	Revision string `json:"revision"`
	// Approve is the plan's spec.approve at Revision.
	Approve string `json:"approve,omitempty"`
	// Approved is the furthest phase ferry has acted on (published a step
	// of). It never moves back: a plan whose Approve is now before it has
	// moved backwards, and the planner stops it (Record feeds it back).
	Approved string `json:"approved,omitempty"`
	// ApprovedBy says who approved each phase, in phase order.
	ApprovedBy []Approval `json:"approvedBy,omitempty"`
	// Phases are the plan's phases in the order they run.
	Phases []PhaseStatus `json:"phases"`
	// Created are the resources executors created that only this record
	// tells apart from the user's (OpenStack keypairs), for clean-up.
	Created []events.Resource `json:"created,omitempty"`
	// Checks are the keys of one-shot steps that passed (probes), sorted;
	// they leave nothing to observe, so the planner learns of them here.
	Checks []string `json:"checks,omitempty"`
	// Inventory is what the cleanup phase removed, is to remove, and left
	// of the old cloud and of the move, and why, once cleanup is approved.
	Inventory []InventoryItem `json:"inventory,omitempty"`
	// Stopped says why no step may run (approval moved backwards).
	Stopped string `json:"stopped,omitempty"`
	// Rollback is spec.rollback.to at Revision: the phases after it are
	// undone.
	Rollback string `json:"rollback,omitempty"`
	// Invalid lists the problems of the plan's file at Revision, one
	// "file:line: field: message" each, when it failed validation. Nothing
	// of the plan runs until a commit fixes the file; the next valid
	// revision clears it.
	Invalid []string `json:"invalid,omitempty"`
	// Unobserved says why the live state (clusters, cloud) could not be
	// read at Revision; nothing of the plan runs until a cycle reads it.
	Unobserved string `json:"unobserved,omitempty"`
	// UpdatedAt is when the status last changed.
	UpdatedAt time.Time `json:"updatedAt,omitzero"`
}

// Approval records who approved a phase: the person who merged the pull
// request, or who pushed the commit, that moved spec.approve to it.
type Approval struct {
	Phase string `json:"phase"`
	// By is the person's name or login.
	By string `json:"by"`
	// PR is the pull request's number; 0 when the approval was a push.
	PR int `json:"pr,omitempty"`
	// Commit is the approving commit.
	Commit string `json:"commit,omitempty"`
	// Content names what was approved: the SHA-256 of the Git object IDs
	// of the plan file and each file it names, in that order, at the
	// revision the phase started from (gitsource.Content's Digest); ""
	// without a forge.
	Content string `json:"content,omitempty"`
}

// String reads "alice (#12)" or "alice (0123abc)".
func (a Approval) String() string {
	switch {
	case a.PR > 0:
		return fmt.Sprintf("%s (#%d)", a.By, a.PR)
	case a.Commit != "":
		return fmt.Sprintf("%s (%s)", a.By, ShortRevision(a.Commit))
	}
	return a.By
}

// PhaseStatus is one phase of a plan.
type PhaseStatus struct {
	Name  string     `json:"name"`
	State PhaseState `json:"state"`
	// Reason explains Blocked, Failed, and why an Approved or Pending phase
	// does not run.
	Reason string `json:"reason,omitempty"`
	// Done counts the steps whose effect is present; Left the steps still
	// to run.
	Done int `json:"done"`
	Left int `json:"left"`
	// Undo: the steps are a rollback's, which undo the phase. A phase
	// that changes direction starts a new history (Git keeps the old).
	Undo bool `json:"undo,omitempty"`
	// Started is when the first step was published; Finished when the phase
	// succeeded or failed.
	Started  time.Time `json:"started,omitzero"`
	Finished time.Time `json:"finished,omitzero"`
	// Since is when the phase changed direction (rolled back, or going
	// forward after a rollback) and began the history its Steps hold; zero
	// for a phase that never did. A result from before it of a step the
	// phase does not list (replayed after a restart) belongs to the earlier
	// history and changes no step.
	Since time.Time `json:"since,omitzero"`
	// Steps are the steps ferry planned or ran, in order: history first,
	// then what is left. Steps already done when first planned are only
	// counted in Done.
	Steps []StepStatus `json:"steps,omitempty"`
}

// StepStatus is one step of a phase.
type StepStatus struct {
	// Key identifies the step within its plan (step.Step.Key).
	Key      string      `json:"key"`
	Executor step.Kind   `json:"executor"`
	Action   step.Action `json:"action"`
	Target   string      `json:"target"`
	State    StepState   `json:"state"`
	// Attempts counts deliveries of the step's latest publication.
	Attempts int `json:"attempts,omitempty"`
	// LastError is the error of the latest failed attempt; it stays after a
	// later success, as history.
	LastError string `json:"lastError,omitempty"`
	// Message says what the executor did.
	Message string `json:"message,omitempty"`
	// Revision is the revision of the latest result: a step that failed at
	// an older revision than the plan's may be worth publishing again.
	Revision string `json:"revision,omitempty"`
	// Started is when the step was published (or its first attempt began);
	// Finished when it succeeded or failed; LastResult when the latest
	// result was reported, which orders redelivered results.
	Started    time.Time `json:"started,omitzero"`
	Finished   time.Time `json:"finished,omitzero"`
	LastResult time.Time `json:"lastResult,omitzero"`
	// Duration is how long the latest attempt took.
	Duration Duration `json:"duration,omitempty"`
}

// Duration is a time.Duration written as "1.5s" rather than nanoseconds.
type Duration time.Duration

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a Go duration string, or nanoseconds as a number.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("duration %s: want a string like \"1.5s\"", b)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// Phase returns the named phase, or nil.
func (st *PlanStatus) Phase(name string) *PhaseStatus {
	for i := range st.Phases {
		if st.Phases[i].Name == name {
			return &st.Phases[i]
		}
	}
	return nil
}

// Step returns the step with the key in the named phase, or nil.
func (ph *PhaseStatus) Step(key string) *StepStatus {
	for i := range ph.Steps {
		if ph.Steps[i].Key == key {
			return &ph.Steps[i]
		}
	}
	return nil
}

// FirstFailed returns the phase's first step that failed for good, or nil.
func (ph *PhaseStatus) FirstFailed() *StepStatus {
	for i := range ph.Steps {
		if ph.Steps[i].State == StepFailed {
			return &ph.Steps[i]
		}
	}
	return nil
}

// Clone returns a deep copy of the status, which may be changed or
// written while the original keeps changing.
func (st *PlanStatus) Clone() *PlanStatus {
	c := *st
	c.ApprovedBy = slices.Clone(st.ApprovedBy)
	c.Created = slices.Clone(st.Created)
	c.Checks = slices.Clone(st.Checks)
	c.Inventory = slices.Clone(st.Inventory)
	c.Invalid = slices.Clone(st.Invalid)
	c.Phases = slices.Clone(st.Phases)
	for i := range c.Phases {
		c.Phases[i].Steps = slices.Clone(c.Phases[i].Steps)
	}
	return &c
}

// ShortRevision shortens a Git commit ID for people; other revisions
// stay.
func ShortRevision(rev string) string {
	if len(rev) == 40 && strings.Trim(rev, "0123456789abcdef") == "" {
		return rev[:12]
	}
	return rev
}

// Title names the step as tables and comments show it:
// "kube: create Cluster default/c".
func (s *StepStatus) Title() string {
	return string(s.Executor) + ": " + string(s.Action) + " " + s.Target
}
