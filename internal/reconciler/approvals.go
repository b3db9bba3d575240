package reconciler

import (
	"context"
	"fmt"

	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/planfile"
	"github.com/ferry-dev/ferry/internal/status"
)

// GitApprovals finds approvers in the plans repository's history: the
// commit that raised spec.approve to the phase, and, when it merged a pull
// request and a forge is configured, that pull request's merger.
type GitApprovals struct {
	Source *gitsource.Source
	Forge  forge.Forge // nil: the commit's author approves
}

var _ Approvals = GitApprovals{}

// Find returns the approval of phase in the plan file at revision: the
// commit that raised spec.approve to it, or for a rollback's approval
// (status.RollbackApproval) the one that set spec.rollback.to.
func (g GitApprovals) Find(ctx context.Context, revision, file, phase string) (status.Approval, error) {
	c, err := g.Source.Introduced(ctx, gitsource.Revision(revision), file, func(data []byte) bool {
		f, err := planfile.Decode(file, data)
		if err != nil {
			return false
		}
		if r := f.Plan.Spec.Rollback; r != nil {
			return status.RollbackApproval(r.To) == phase
		}
		return f.Plan.Spec.Approve == phase
	})
	if err != nil {
		return status.Approval{}, fmt.Errorf("find the commit that approved %s in %s: %w", phase, file, err)
	}
	a := status.Approval{Phase: phase, By: c.Author.Name, Commit: string(c.Hash)}
	if n, ok := c.PullRequest(); ok {
		a.PR = n
		if g.Forge != nil {
			prs, err := g.Forge.PullRequestsForCommit(ctx, string(c.Hash))
			if err != nil {
				return a, fmt.Errorf("pull request of approving commit %s: %w", c.Hash.Short(), err)
			}
			if pr, ok := forge.ApprovingPullRequest(prs, string(c.Hash)); ok && pr.MergedBy != "" {
				a.By, a.PR = pr.MergedBy, pr.Number
			}
		}
	}
	return a, nil
}
