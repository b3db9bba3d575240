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

// ApprovalVerifier tells the loop whether it may act on an approval, and
// on a plan's content.
type ApprovalVerifier interface {
	// Verify judges the approval of phase (a phase, or
	// status.RollbackApproval) in file at revision.
	Verify(ctx context.Context, revision, file, phase string) (Verdict, error)
	// VerifyContent judges the state of the plan in file at revision and
	// of the files it names (paths, file first): whether a reviewed
	// change brought them there.
	VerifyContent(ctx context.Context, revision, file string, paths []string) (Verdict, error)
}

// Verdict is whether an approval may be acted on; when not, the commit
// that made it and why.
type Verdict struct {
	OK     bool
	Commit string
	Reason string
	// Fallback, for a refused approval of a phase, is the approval the
	// plan had before the refused commit, as far back as needed for one
	// that a merged pull request made ("" for none): what ferry may act
	// on instead.
	Fallback string
}

// refusal is an approval of p the loop does not act on: the plan as the
// loop plans it instead, and why.
type refusal struct {
	plan     *v1alpha1.MigrationPlan
	from, to string // the phases not acted on: after from, up to to
	rollback bool
	// content: the plan's content was not reviewed; nothing of it runs.
	content bool
	reason  string
	// again: the approval or the content could not be verified yet (the
	// forge did not answer, or has not recorded the merge): nothing of the
	// plan runs, and the next cycle asks again.
	again bool
}

// verify checks what a plan asks the loop to act on, at every revision:
// its content (the plan file and the files it names) and its approval
// (spec.approve, unless lowered below what was acted on, or
// spec.rollback). It returns nil when the loop may act, or the refusal:
// for content, the plan stopped; for an approval, the plan with the
// approval taken back to what was acted on; and why. What was acted on
// (record.Approved) is not trusted to skip the check: after a restart it
// is read back from the status branch, which anyone who can push there
// can edit.
func (l *Loop) verify(ctx context.Context, cycle Cycle, file string, p *v1alpha1.MigrationPlan, st *planState, record observed.Record) *refusal {
	if l.Verifier == nil {
		return nil
	}
	phase := p.Spec.Approve
	if p.Spec.Rollback != nil {
		phase = status.RollbackApproval(p.Spec.Rollback.To)
	} else if phase == "" || p.PhaseIndex(phase) < p.PhaseIndex(record.Approved) {
		return nil // nothing approved, or lowered: nothing new to trust
	}
	paths := planPaths(file, p)
	v, again := l.verdict(ctx, cycle, st, file+"\x00content", func() (Verdict, error) {
		return l.Verifier.VerifyContent(ctx, cycle.Revision, file, paths)
	}, "the plan")
	if again {
		return &refusal{plan: p, reason: v.Reason, again: true}
	}
	if !v.OK {
		return &refusal{plan: p, content: true, reason: v.Reason}
	}
	v, again = l.verdict(ctx, cycle, st, file+"\x00"+phase, func() (Verdict, error) {
		return l.Verifier.Verify(ctx, cycle.Revision, file, phase)
	}, approvalName(phase))
	if again {
		return &refusal{plan: p, reason: v.Reason, again: true}
	}
	if v.OK {
		return nil
	}
	// Planned as approved up to the approval before the refused one that
	// a merged pull request made, not up to what the status says was
	// acted on: the status branch may have been edited.
	q := *p
	q.Spec.Rollback, q.Spec.Approve = nil, v.Fallback
	if p.PhaseIndex(q.Spec.Approve) > p.PhaseIndex(p.Spec.Approve) {
		q.Spec.Approve = p.Spec.Approve
	}
	return &refusal{plan: &q, from: q.Spec.Approve, to: p.Spec.Approve, rollback: p.Spec.Rollback != nil, reason: v.Reason}
}

// verdict returns the verdict on what (an approval or a plan's content)
// at cycle's revision, from the plan's memory or from check; again is true
// when check could not tell yet (the forge did not answer, or has not
// recorded the merge): the verdict refuses, uncached, and the next cycle
// asks again.
func (l *Loop) verdict(ctx context.Context, cycle Cycle, st *planState, key string, check func() (Verdict, error), what string) (Verdict, bool) {
	key = cycle.Revision + "\x00" + key
	if v, known := st.verdict(key); known {
		return v, false
	}
	v, err := check()
	if err != nil {
		return Verdict{Reason: fmt.Sprintf("%s is not acted on until it is verified: %v", what, err)}, true
	}
	if !v.OK {
		logging.From(ctx).Warn("not acted on: it was not merged through a pull request", "what", what, "commit", short(v.Commit), "reason", v.Reason)
	}
	st.verified(cycle.Revision, key, v)
	return v, false
}

// planPaths are the files whose content a plan acts on: its file, then
// the manifests it names.
func planPaths(file string, p *v1alpha1.MigrationPlan) []string {
	paths := []string{file}
	if m := p.Spec.Manifests; m != nil {
		if m.CloudControllerManager != nil && m.CloudControllerManager.Path != "" {
			paths = append(paths, m.CloudControllerManager.Path)
		}
		paths = append(paths, m.VPNOverlay...)
	}
	return paths
}

// explain writes a refusal into the result planned from its plan: the
// file's spec.approve; for content, the plan stopped and its next phase
// Blocked for the reason; for an approval, the phases it approved Pending
// for the reason, and a refused rollback as what stops the plan.
func (r *refusal) explain(p *v1alpha1.MigrationPlan, res *planner.Result) {
	res.Approve = p.Spec.Approve
	if r.again {
		res.Runnable = ""
		for i := range res.Phases {
			if ph := &res.Phases[i]; ph.State == planner.Approved && ph.Reason == "" {
				ph.Reason = r.reason
				break
			}
		}
		return
	}
	if r.content {
		res.Stopped, res.Runnable = r.reason, ""
		for i := range res.Phases {
			if ph := &res.Phases[i]; ph.State == planner.Approved {
				ph.State, ph.Reason = planner.Blocked, r.reason
				break
			}
		}
		return
	}
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
