// Plan-level marks (approvals, an invalid file, unobserved state) and the
// record the planner reads back.

package status

import (
	"slices"
	"time"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/observed"
)

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

// RollbackApproval is the Approval.Phase of a rollback's approval: the
// merge that set spec.rollback.to.
func RollbackApproval(to string) string { return "rollback to " + to }

// Approving is the Approval.Phase whose pull request and commit show the
// plan's progress: the rollback's while one is asked for, else the
// approved phase's.
func (st *PlanStatus) Approving() string {
	if st.Rollback != "" {
		return RollbackApproval(st.Rollback)
	}
	return st.Approve
}

// Record is what the planner needs back from the status: the furthest
// phase acted on, and the checks that passed.
func Record(st *PlanStatus) observed.Record {
	if st == nil {
		return observed.Record{}
	}
	return observed.Record{Approved: st.Approved, Checks: slices.Clone(st.Checks), Keypairs: Keypairs(st.Created)}
}

// Keypairs are the names of the keypairs among created resources, sorted.
func Keypairs(created []events.Resource) []string {
	var out []string
	for _, r := range created {
		if r.Kind == events.ResourceKeypair && !slices.Contains(out, r.Name) {
			out = append(out, r.Name)
		}
	}
	slices.Sort(out)
	return out
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
