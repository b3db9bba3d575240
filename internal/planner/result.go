package planner

import "github.com/ferry-dev/ferry/internal/step"

// PhaseState is where a phase stands, as far as the observed state tells.
// The status adds Running and Failed from the executors' results.
type PhaseState string

const (
	// Pending: not approved yet; nothing of it runs.
	Pending PhaseState = "Pending"
	// Approved: approved with steps left; runnable once the phases before it
	// succeeded.
	Approved PhaseState = "Approved"
	// Succeeded: every step's effect is present.
	Succeeded PhaseState = "Succeeded"
	// Blocked: a health check failed or the input is incomplete; Reason
	// says which. Nothing of it runs until the cause goes away.
	Blocked PhaseState = "Blocked"
	// RolledBack: spec.rollback undoes the phase, and nothing of it is
	// left.
	RolledBack PhaseState = "RolledBack"
)

// Phase is one phase of a plan and the steps it has left.
type Phase struct {
	Name  string     `json:"name"`
	State PhaseState `json:"state"`
	// Reason explains Blocked, and why an Approved phase is not next.
	Reason string `json:"reason,omitempty"`
	// Groups are the steps left, in order; a step whose effect is already
	// present is not listed.
	Groups []step.Group `json:"groups,omitempty"`
	// Done counts the steps whose effect is already present.
	Done int `json:"done"`
	// Undo: spec.rollback undoes the phase, and Groups are the steps
	// that remove what it made.
	Undo bool `json:"undo,omitempty"`
	// Incomplete: something blocked the phase (Reason, or the blocking
	// reasons of a Pending phase, say what), and what it could not see may
	// have left steps out of Groups. A step it does not list is then not
	// known to be done, as it is otherwise.
	Incomplete bool `json:"incomplete,omitempty"`
}

// Result is the plan's phases against the observed state.
type Result struct {
	Plan     string  `json:"plan"`
	Cluster  string  `json:"cluster"`
	Strategy string  `json:"strategy"`
	Provider string  `json:"provider"`
	Approve  string  `json:"approve"`
	Phases   []Phase `json:"phases"`
	// Stopped says why no step may run at all (approval moved backwards).
	Stopped string `json:"stopped,omitempty"`
	// Runnable is the phase whose first group runs next; empty when none.
	Runnable string `json:"runnable,omitempty"`
	// Rollback is spec.rollback.to when the plan asks for a rollback.
	Rollback string `json:"rollback,omitempty"`
	// RolledBack: the rollback asked for is done, every undone phase is
	// RolledBack.
	RolledBack bool `json:"rolledBack,omitempty"`
	// NotUndone lists what the rollback leaves as it is, and why.
	NotUndone []string `json:"notUndone,omitempty"`
	// Inventory is, once cleanup is approved (replace), what the cleanup
	// phase removes and what it leaves, and why, sorted by resource.
	Inventory []InventoryItem `json:"inventory,omitempty"`
}

// InventoryItem is one resource the cleanup phase removes or leaves.
type InventoryItem struct {
	// Resource reads "Kind namespace/name", or "OpenStack kind name".
	Resource string `json:"resource"`
	// State is InventoryRemoved, InventoryToRemove or InventoryLeft.
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
}

// Inventory states.
const (
	InventoryRemoved  = "removed"
	InventoryToRemove = "to remove"
	InventoryLeft     = "left"
)

// Next returns the group to publish now: the first group of the runnable
// phase, or nil when nothing may run.
func (r *Result) Next() *step.Group {
	if r.Runnable == "" {
		return nil
	}
	for i := range r.Phases {
		p := &r.Phases[i]
		if p.Name == r.Runnable && len(p.Groups) > 0 {
			return &p.Groups[0]
		}
	}
	return nil
}

// Phase returns the named phase, or nil.
func (r *Result) Phase(name string) *Phase {
	for i := range r.Phases {
		if r.Phases[i].Name == name {
			return &r.Phases[i]
		}
	}
	return nil
}
