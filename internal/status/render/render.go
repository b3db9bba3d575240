// What the table and the comment share: the header line, the step a
// person wants to see for a phase, and text cut to fit a cell.

package render

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ferry-dev/ferry/internal/status"
)

// Caps on one cell, in characters: a status shows where things stand, the
// YAML file and the step list keep the full text.
const (
	tableCellMax = 70
	mdCellMax    = 300
	mdReasonMax  = 1000
)

// header is the line that names the plan and where it stands.
func header(st *status.PlanStatus) string {
	var b strings.Builder
	b.WriteString(st.Plan)
	if st.Revision != "" {
		b.WriteString(" at revision " + status.ShortRevision(st.Revision))
	}
	approve := st.Approve
	if approve == "" {
		approve = "nothing"
	}
	b.WriteString(": approve " + approve)
	if st.Approved != "" {
		b.WriteString(", acted on up to " + st.Approved)
	}
	if st.Rollback != "" {
		b.WriteString(", rolling back to " + st.Rollback)
		if by := approver(st, status.RollbackApproval(st.Rollback)); by != "" {
			b.WriteString(" (approved by " + by + ")")
		}
	}
	if !st.UpdatedAt.IsZero() {
		b.WriteString(", updated " + st.UpdatedAt.UTC().Format(time.RFC3339))
	}
	return b.String()
}

// currentStep is the step a person wants to see for a phase: the one that
// failed, else the one in flight, else the next one to run when the phase
// is approved; nil for a phase that is done or waits for its approval.
func currentStep(ph *status.PhaseStatus) *status.StepStatus {
	if s := ph.FirstFailed(); s != nil {
		return s
	}
	for i := range ph.Steps {
		if ph.Steps[i].State.InFlight() {
			return &ph.Steps[i]
		}
	}
	if ph.State == status.PhasePending {
		return nil
	}
	for i := range ph.Steps {
		if ph.Steps[i].State == status.StepPending {
			return &ph.Steps[i]
		}
	}
	return nil
}

// explained reports whether a phase's reason is worth a line: Pending
// phases all say "not approved", Succeeded ones need none.
func explained(ph status.PhaseStatus) bool {
	return ph.Reason != "" && ph.State != status.PhasePending && ph.State != status.PhaseSucceeded
}

func approver(st *status.PlanStatus, phase string) string {
	for _, a := range st.ApprovedBy {
		if a.Phase == phase {
			return a.String()
		}
	}
	return ""
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine folds a multi-line message into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// clip shortens s to max characters, on one line, marking the cut.
func clip(s string, max int) string {
	s = oneLine(s)
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}
