package reconciler

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"time"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/planfile"
	"github.com/ferry-dev/ferry/internal/status"
)

// ApprovalContext is the commit status ferry sets on a commit whose
// approval it does not act on.
const ApprovalContext = "ferry/approval"

// GitApprovals finds approvers in the plans repository's history: the
// commit that raised spec.approve to the phase, and, when it merged a pull
// request and a forge is configured, that pull request's merger.
//
// With a forge, only a merged pull request approves (Verify): anyone who
// can push can write a commit's author name, but only the forge says who
// merged. Without a forge, or with AllowPush, the commit's author does.
type GitApprovals struct {
	Source *gitsource.Source
	Forge  forge.Forge // nil: the commit's author approves
	// AllowPush accepts approvals pushed without a pull request although
	// a forge is configured (--allow-push-approvals).
	AllowPush bool
	// Policy says which approving reviews each approval needs
	// (--required-reviews, --owners-file); none when empty.
	Policy Policy
	// MergeGrace is how long after ferry first sees an approving commit
	// that no merged pull request is known for it asks the forge again
	// before it refuses the approval as pushed; default DefaultMergeGrace.
	MergeGrace time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time

	mu      sync.Mutex
	refused map[string]bool // commits whose ApprovalContext status was set
	// found are the approvals found at revision foundAt, by file and
	// phase: the loop and the recorder ask each cycle until the phase
	// runs, and history and forge do not change under a revision.
	found   map[string]foundApproval
	foundAt string
	// firstSeen is when each approving commit without a known merged pull
	// request was first looked up, for MergeGrace.
	firstSeen map[string]time.Time
	// merges are the pull requests that merged commits into the branch,
	// by commit (mergedBy).
	merges map[string]forge.PullRequest
	// elsewhere are pull requests merged into another branch than the
	// tracked one, by the commit their merge made: no approval, and said.
	elsewhere map[string]forge.PullRequest
	// contents are the last answers of Source.Changed, by plan file.
	contents map[string]gitsource.Content
}

// DefaultMergeGrace is GitApprovals.MergeGrace's default. A forge moves
// the branch before it records the merge: Gitea's fast-forward rebase
// merge was seen asked about in between, its head commit still the head
// of an open pull request, and a push webhook can arrive then too.
const DefaultMergeGrace = 30 * time.Second

// errMergeNotRecorded is Verify's and Find's error while an approving
// commit is within MergeGrace: not a refusal yet, asked again next cycle.
type errMergeNotRecorded struct{ commit string }

func (e errMergeNotRecorded) Error() string {
	return fmt.Sprintf("the forge has not said yet which pull request merged commit %s; asking again", short(e.commit))
}

type foundApproval struct {
	approval status.Approval
	merged   bool
}

var (
	_ Approvals        = (*GitApprovals)(nil)
	_ ApprovalVerifier = (*GitApprovals)(nil)
)

// Find returns the approval of phase in the plan file at revision: the
// commit that raised spec.approve to it, or for a rollback's approval
// (status.RollbackApproval) the one that set spec.rollback.to. With a
// forge (and without AllowPush), an approval no merged pull request made
// is no approval: Find returns an error, and the status names no
// approver.
func (g *GitApprovals) Find(ctx context.Context, revision, file, phase string) (status.Approval, error) {
	a, merged, err := g.find(ctx, revision, file, phase)
	if err == nil && g.Forge != nil && !g.AllowPush && !merged {
		err = fmt.Errorf("%s was pushed without a pull request (commit %s): not an approval", approvalName(phase), short(a.Commit))
	}
	g.mu.Lock()
	if c := g.contents[file]; string(c.Rev) == revision {
		a.Content = c.Digest // what VerifyContent found merged at revision
	}
	g.mu.Unlock()
	return a, err
}

// find is Find, and whether a merged pull request made the approval (a
// question only asked of the forge: a rebase merge leaves no number in
// the commit), from the cache when asked before at revision.
func (g *GitApprovals) find(ctx context.Context, revision, file, phase string) (status.Approval, bool, error) {
	key := file + "\x00" + phase
	g.mu.Lock()
	f, ok := g.found[key]
	if g.foundAt != revision {
		ok = false
	}
	g.mu.Unlock()
	if ok {
		return f.approval, f.merged, nil
	}
	a, merged, err := g.lookUp(ctx, revision, file, phase)
	if err != nil {
		return a, false, err
	}
	if !merged && g.Forge != nil && !g.AllowPush && g.withinGrace(a.Commit) {
		return a, false, errMergeNotRecorded{commit: a.Commit} // not cached
	}
	g.mu.Lock()
	if g.foundAt != revision {
		g.found, g.foundAt = map[string]foundApproval{}, revision
	}
	g.found[key] = foundApproval{approval: a, merged: merged}
	g.mu.Unlock()
	return a, merged, nil
}

// withinGrace says whether commit was first seen without a merged pull
// request less than MergeGrace ago, and notes when it was first seen.
func (g *GitApprovals) withinGrace(commit string) bool {
	now, grace := time.Now, g.MergeGrace
	if g.Now != nil {
		now = g.Now
	}
	if grace == 0 {
		grace = DefaultMergeGrace
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.firstSeen == nil {
		g.firstSeen = map[string]time.Time{}
	}
	first, ok := g.firstSeen[commit]
	if !ok {
		first = now()
		g.firstSeen[commit] = first
	}
	return now().Sub(first) < grace
}

// lookUp is find without the cache.
func (g *GitApprovals) lookUp(ctx context.Context, revision, file, phase string) (status.Approval, bool, error) {
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
		return status.Approval{}, false, fmt.Errorf("find the commit that approved %s in %s: %w", phase, file, err)
	}
	a := status.Approval{Phase: phase, By: c.Author.Name, Commit: string(c.Hash)}
	if n, ok := c.PullRequest(); ok {
		a.PR = n
	}
	if g.Forge == nil {
		return a, false, nil
	}
	pr, ok, err := g.mergedBy(ctx, string(c.Hash))
	if err != nil {
		return a, false, err
	}
	if ok {
		a.PR = pr.Number
		if pr.MergedBy != "" {
			a.By = pr.MergedBy
		}
	}
	return a, ok, nil
}

// mergedBy asks the forge which pull request merged commit into the
// tracked branch (forge.ApprovingPullRequest), remembering each answer
// that names one: a merge, once recorded, does not change, so that only
// new commits cost a request.
func (g *GitApprovals) mergedBy(ctx context.Context, commit string) (forge.PullRequest, bool, error) {
	g.mu.Lock()
	pr, ok := g.merges[commit]
	g.mu.Unlock()
	if ok {
		return pr, true, nil
	}
	prs, err := g.Forge.PullRequestsForCommit(ctx, commit)
	if err != nil {
		return forge.PullRequest{}, false, fmt.Errorf("pull request of commit %s: %w", short(commit), err)
	}
	pr, ok = forge.ApprovingPullRequest(prs, commit, g.Source.Branch())
	if !ok {
		for _, p := range prs {
			if p.Merged {
				g.mu.Lock()
				if g.elsewhere == nil {
					g.elsewhere = map[string]forge.PullRequest{}
				}
				g.elsewhere[commit] = p
				g.mu.Unlock()
				break
			}
		}
	}
	if ok {
		g.mu.Lock()
		if g.merges == nil {
			g.merges = map[string]forge.PullRequest{}
		}
		g.merges[commit] = pr
		g.mu.Unlock()
	}
	return pr, ok, nil
}

// Verify reports whether ferry may act on the approval of phase in file
// at revision: always without a forge or with AllowPush; with a forge,
// only when a merged pull request made it. A refused approval's commit
// gets the ApprovalContext commit status, once, saying why.
func (g *GitApprovals) Verify(ctx context.Context, revision, file, phase string) (Verdict, error) {
	if g.Forge == nil || g.AllowPush {
		return Verdict{OK: true}, nil
	}
	a, merged, err := g.find(ctx, revision, file, phase)
	if err != nil {
		return Verdict{}, err
	}
	if merged {
		if v, refused, err := g.forwardSince(ctx, revision, file, phase, a); refused || err != nil {
			return v, err
		}
		return g.reviewed(ctx, file, phase, a)
	}
	reason := fmt.Sprintf("%s was approved by commit %s (author %q) pushed without a pull request: ferry acts only on approvals merged through a pull request into %s; approve it in one",
		approvalName(phase), short(a.Commit), a.By, g.Source.Branch())
	desc := fmt.Sprintf("not acted on: %s pushed without a pull request; approve it in one", approvalName(phase))
	return g.refuseApproval(ctx, file, a.Commit, reason, desc)
}

// forwardSince refuses a's approval of a rollback (phase is
// status.RollbackApproval) when a later commit raised spec.approve: the
// team approved going forward after it asked to go back, and ferry does
// not guess which it wants. Lowering spec.approve is no forward approval:
// the walk goes on past it. Nothing of the plan runs (no fall-back) until
// a merged pull request removes spec.rollback or sets it anew.
func (g *GitApprovals) forwardSince(ctx context.Context, revision, file, phase string, a status.Approval) (Verdict, bool, error) {
	if _, ok := strings.CutPrefix(phase, status.RollbackApproval("")); !ok {
		return Verdict{}, false, nil
	}
	rev := gitsource.Revision(revision)
	p, err := g.planAt(rev, file)
	if err != nil || p == nil {
		return Verdict{}, false, err
	}
	approve := p.Spec.Approve
	for approve != "" {
		c, err := g.Source.Introduced(ctx, rev, file, func(data []byte) bool {
			f, err := planfile.Decode(file, data)
			return err == nil && f.Plan.Spec.Approve == approve
		})
		if err != nil {
			return Verdict{}, false, fmt.Errorf("find the commit that set spec.approve to %s in %s: %w", approve, file, err)
		}
		after, err := g.Source.Descends(gitsource.Revision(a.Commit), c.Hash)
		if err != nil || after {
			return Verdict{}, false, err // set at or before the rollback
		}
		if len(c.Parents) == 0 {
			break
		}
		before, err := g.planAt(c.Parents[0], file)
		if err != nil {
			return Verdict{}, false, err
		}
		was := ""
		if before != nil {
			was = before.Spec.Approve
		}
		if p.PhaseIndex(approve) > p.PhaseIndex(was) {
			reason := fmt.Sprintf("%s was merged in commit %s, and commit %s (author %q) raised spec.approve to %s after it: ferry does not roll back over a later forward approval; merge a pull request that removes spec.rollback, or that sets it again",
				approvalName(phase), short(a.Commit), short(string(c.Hash)), c.Author.Name, approve)
			desc := fmt.Sprintf("not acted on: %s predates the approval of %s", approvalName(phase), approve)
			v, err := g.refuse(ctx, string(c.Hash), reason, desc)
			return v, true, err
		}
		rev, approve = c.Parents[0], was
	}
	return Verdict{}, false, nil
}

// reviewed is Verify's verdict on a's approval of phase in file, which a
// merged pull request made: OK unless it lacks reviews the policy asks
// (Policy.lacks).
func (g *GitApprovals) reviewed(ctx context.Context, file, phase string, a status.Approval) (Verdict, error) {
	lacks, err := g.lacks(ctx, file, phase, a)
	if err != nil {
		return Verdict{}, err
	}
	if len(lacks) == 0 {
		return Verdict{OK: true}, nil
	}
	why, brief := make([]string, len(lacks)), make([]string, len(lacks))
	for i, l := range lacks {
		why[i], brief[i] = l.why, l.brief
	}
	desc := fmt.Sprintf("not acted on: %s %s", approvalName(phase), strings.Join(brief, ", and "))
	return g.refuseApproval(ctx, file, a.Commit, strings.Join(why, "; and "), desc)
}

// lacks is what a's approval of phase in file, which a merged pull
// request made, lacks of the policy (Policy.lacks); the forge is asked
// for no reviews when the policy asks none of it.
func (g *GitApprovals) lacks(ctx context.Context, file, phase string, a status.Approval) ([]lack, error) {
	if !g.Policy.asks(file, phase) {
		return nil, nil
	}
	pr, _, err := g.mergedBy(ctx, a.Commit)
	if err != nil {
		return nil, err
	}
	approvers, err := reviewApprovers(ctx, g.Forge, pr)
	if err != nil {
		return nil, err
	}
	return g.Policy.lacks(file, phase, pr.Number, approvers), nil
}

// refuseApproval is the verdict refusing the approval commit made in
// file, for reason (refuse), with the approval to fall back to.
func (g *GitApprovals) refuseApproval(ctx context.Context, file, commit, reason, desc string) (Verdict, error) {
	v, err := g.refuse(ctx, commit, reason, desc)
	if err != nil {
		return v, err
	}
	v.Fallback, err = g.fallback(ctx, file, commit)
	return v, err
}

// listed is ": a, b" for a non-empty list.
func listed(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return " (" + strings.Join(names, ", ") + ")"
}

// maxFallbacks bounds fallback's walk back through refused approvals.
const maxFallbacks = 16

// fallback is the approval of file that ferry may act on in place of the
// one commit made, which it refused: spec.approve as it was before commit
// when a merged pull request with the reviews the policy asks made it
// (an owner's among them), else the one before that, up to maxFallbacks
// back; "" when none (or a rollback was asked before).
func (g *GitApprovals) fallback(ctx context.Context, file, commit string) (string, error) {
	for range maxFallbacks {
		c, err := g.Source.Commit(gitsource.Revision(commit))
		if err != nil {
			return "", err
		}
		if len(c.Parents) == 0 {
			return "", nil
		}
		parent := c.Parents[0]
		phase, err := g.approveAt(parent, file)
		if err != nil || phase == "" {
			return "", err
		}
		a, merged, err := g.lookUp(ctx, string(parent), file, phase)
		if err != nil {
			return "", err
		}
		if merged {
			// Merged, and with the reviews the policy asks of it.
			lacks, err := g.lacks(ctx, file, phase, a)
			if err != nil || len(lacks) == 0 {
				return phase, err
			}
		}
		commit = a.Commit
	}
	return "", nil
}

// approveAt is the spec.approve of the plan in file at rev: "" when the
// file is missing or invalid there, or asks for a rollback.
func (g *GitApprovals) approveAt(rev gitsource.Revision, file string) (string, error) {
	p, err := g.planAt(rev, file)
	if err != nil || p == nil || p.Spec.Rollback != nil {
		return "", err
	}
	return p.Spec.Approve, nil
}

// planAt is the plan in file at rev; nil when the file is missing or
// invalid there.
func (g *GitApprovals) planAt(rev gitsource.Revision, file string) (*v1alpha1.MigrationPlan, error) {
	fsys, err := g.Source.FS(rev)
	if err != nil {
		return nil, err
	}
	data, err := fs.ReadFile(fsys, file)
	if err != nil {
		return nil, nil //nolint:nilerr // a missing file approved nothing
	}
	f, err := planfile.Decode(file, data)
	if err != nil {
		return nil, nil //nolint:nilerr // an invalid file approved nothing
	}
	return f.Plan, nil
}

// VerifyContent reports whether ferry may act on the plan in file at
// revision as it is there: the plan file and every file it names (paths)
// must have been brought into their state by a pull request merged into
// the tracked branch. A push that changed any of them outside a pull
// request is refused, and its commit gets the ApprovalContext commit
// status, until a merged pull request carries the change; a push that
// touches none of them changes nothing. Always OK without a forge or with
// AllowPush.
func (g *GitApprovals) VerifyContent(ctx context.Context, revision, file string, paths []string) (Verdict, error) {
	if g.Forge == nil || g.AllowPush {
		return Verdict{OK: true}, nil
	}
	g.mu.Lock()
	known := g.contents[file]
	g.mu.Unlock()
	c, err := g.Source.Changed(ctx, gitsource.Revision(revision), paths, known)
	if err != nil {
		return Verdict{}, fmt.Errorf("find the commit that last changed %s: %w", strings.Join(paths, ", "), err)
	}
	g.mu.Lock()
	if g.contents == nil {
		g.contents = map[string]gitsource.Content{}
	}
	g.contents[file] = c
	g.mu.Unlock()
	commit := string(c.Commit.Hash)
	pr, merged, err := g.mergedBy(ctx, commit)
	if err != nil {
		return Verdict{}, err
	}
	if merged {
		return g.owned(ctx, file, commit, pr)
	}
	if g.withinGrace(commit) {
		return Verdict{}, errMergeNotRecorded{commit: commit}
	}
	how := "without a pull request"
	g.mu.Lock()
	if pr, ok := g.elsewhere[commit]; ok {
		how = fmt.Sprintf("through #%d, merged into %s, not into %s: without a pull request into %s", pr.Number, pr.BaseRef, g.Source.Branch(), g.Source.Branch())
	}
	g.mu.Unlock()
	reason := fmt.Sprintf("commit %s (author %q) changed %s %s: ferry acts on a plan only as merged through a pull request into %s; nothing of this plan runs until a merged pull request carries the change",
		short(commit), c.Commit.Author.Name, strings.Join(paths, ", "), how, g.Source.Branch())
	desc := fmt.Sprintf("not acted on: %s changed without a pull request; merge the change through one", file)
	return g.refuse(ctx, commit, reason, desc)
}

// owned is VerifyContent's verdict on the content that pull request pr
// merged in commit: OK unless file has owners (--owners-file) and none of
// them approved pr, for an owner's word on a plan covers what it does,
// not only its spec.approve.
func (g *GitApprovals) owned(ctx context.Context, file, commit string, pr forge.PullRequest) (Verdict, error) {
	if !g.Policy.asks(file, "") {
		return Verdict{OK: true, Commit: commit}, nil
	}
	approvers, err := reviewApprovers(ctx, g.Forge, pr)
	if err != nil {
		return Verdict{}, err
	}
	lacks := g.Policy.lacks(file, "", pr.Number, approvers)
	if len(lacks) == 0 {
		return Verdict{OK: true, Commit: commit}, nil
	}
	return g.refuse(ctx, commit, lacks[0].why+"; nothing of this plan runs until a pull request that one of them approves carries the change",
		"not acted on: "+file+" "+lacks[0].brief)
}

// refuse is the verdict refusing what commit did for reason, and sets the
// ApprovalContext commit status (desc) on commit, once.
func (g *GitApprovals) refuse(ctx context.Context, commit, reason, desc string) (Verdict, error) {
	v := Verdict{Commit: commit, Reason: reason}
	g.mu.Lock()
	done := g.refused[commit]
	g.mu.Unlock()
	if done {
		return v, nil
	}
	if err := g.Forge.SetStatus(ctx, commit, ApprovalContext, forge.StateFailure, desc, ""); err != nil {
		return v, fmt.Errorf("set %s on %s: %w", ApprovalContext, short(commit), err)
	}
	g.mu.Lock()
	if g.refused == nil {
		g.refused = map[string]bool{}
	}
	g.refused[commit] = true
	g.mu.Unlock()
	return v, nil
}

// approvalName names an approval in a sentence: "phase workers" or
// "rollback to cluster".
func approvalName(phase string) string {
	if to, ok := strings.CutPrefix(phase, status.RollbackApproval("")); ok {
		return "spec.rollback to " + to
	}
	return "phase " + phase
}
