package reconciler

// Acting only on approvals that a merged pull request made, when the
// forge can say so.

import (
	"context"
	"fmt"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/status"
)

// ApprovalVerifier tells the loop whether it may act on an approval.
type ApprovalVerifier interface {
	// Verify judges the approval of phase (a phase, or
	// status.RollbackApproval) in file at revision.
	Verify(ctx context.Context, revision, file, phase string) (Verdict, error)
}

// Verdict is whether an approval may be acted on; when not, the commit
// that made it and why.
type Verdict struct {
	OK     bool
	Commit string
	Reason string
}

// refusal is an approval of p the loop does not act on: the plan as the
// loop plans it instead, and why.
type refusal struct {
	plan     *v1alpha1.MigrationPlan
	from, to string // the phases not acted on: after from, up to to
	rollback bool
	reason   string
	// again: the approval could not be verified yet (the forge did not
	// answer, or has not recorded the merge); the next cycle asks again.
	again bool
}

// verify checks the approval a plan asks the loop to act on for the first
// time (a spec.approve past the furthest phase acted on, or a
// spec.rollback), and returns nil when it may, or the refusal: the plan
// with the approval taken back to what was acted on, and why.
func (l *Loop) verify(ctx context.Context, cycle Cycle, file string, p *v1alpha1.MigrationPlan, st *planState, record observed.Record) *refusal {
	if l.Verifier == nil {
		return nil
	}
	phase := p.Spec.Approve
	if p.Spec.Rollback != nil {
		phase = status.RollbackApproval(p.Spec.Rollback.To)
	} else if p.PhaseIndex(phase) <= p.PhaseIndex(record.Approved) {
		return nil // lowered or already acted on: nothing new to trust
	}
	key := cycle.Revision + "\x00" + file + "\x00" + phase
	v, known := st.verdict(key)
	again := false
	if !known {
		var err error
		v, err = l.Verifier.Verify(ctx, cycle.Revision, file, phase)
		switch {
		case err != nil:
			// Not cached, and the plan is not settled: the next cycle
			// asks again.
			again = true
			v = Verdict{Reason: fmt.Sprintf("%s is not acted on until its approval is verified: %v", approvalName(phase), err)}
		case !v.OK:
			logging.From(ctx).Warn("approval not acted on: it was not merged through a pull request", "approval", phase, "commit", short(v.Commit))
			fallthrough
		default:
			st.verified(cycle.Revision, key, v)
		}
	}
	if v.OK {
		return nil
	}
	q := *p
	q.Spec.Rollback, q.Spec.Approve = nil, record.Approved
	if p.PhaseIndex(q.Spec.Approve) > p.PhaseIndex(p.Spec.Approve) {
		q.Spec.Approve = p.Spec.Approve
	}
	return &refusal{plan: &q, from: q.Spec.Approve, to: p.Spec.Approve, rollback: p.Spec.Rollback != nil, reason: v.Reason, again: again}
}

// explain writes a refusal into the result planned from its plan: the
// file's spec.approve, the phases it approved Pending for the refusal's
// reason, and a refused rollback as what stops the plan.
func (r *refusal) explain(p *v1alpha1.MigrationPlan, res *planner.Result) {
	res.Approve = p.Spec.Approve
	if r.rollback {
		res.Stopped = r.reason
		return
	}
	for i := range res.Phases {
		ph := &res.Phases[i]
		n := p.PhaseIndex(ph.Name)
		if n > p.PhaseIndex(r.from) && n <= p.PhaseIndex(r.to) && ph.State == planner.Pending {
			ph.Reason = r.reason
		}
	}
}
