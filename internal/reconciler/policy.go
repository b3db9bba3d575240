package reconciler

// The review policy: how many approving reviews a phase's approval needs,
// and whose.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ferry-dev/ferry/internal/forge"
)

// Policy is what an approval needs beyond the merge of the pull request
// that made it: approving reviews of the pull request's last commit by
// accounts with write access other than its author (reviewApprovers), as
// many as Reviews asks of the phase, one of them by an owner of the plan
// file when Owners names any. The zero value asks nothing.
type Policy struct {
	Reviews ReviewPolicy // --required-reviews
	Owners  Owners       // --owners-file
}

// asks says whether p asks anything of an approval of phase (a phase, or
// status.RollbackApproval) in file: whether its reviews must be read.
func (p Policy) asks(file, phase string) bool { // phase "": a change to file's content
	return p.Reviews[phase] > 0 || len(p.Owners.Of(file)) > 0
}

// lack is one thing an approval lacks of the policy: why, in a sentence
// that names the approval, and briefly, after the approval's name, for a
// commit status.
type lack struct{ why, brief string }

// lacks is what the approval of phase in file, made by pull request pr,
// or for phase "" what pull request pr's change to file or the files it
// names (which only owners judge) lacks of p, given the accounts whose approving reviews count
// (reviewApprovers of pr): none when it has all that p asks. Verify, its
// fall-back and the merge gate all judge by it.
func (p Policy) lacks(file, phase string, pr int, approvers []string) []lack {
	var out []lack
	if need := p.Reviews[phase]; len(approvers) < need {
		out = append(out, lack{
			why: fmt.Sprintf("%s needs %d approving reviews of #%d's last commit by accounts with write access other than its author (--required-reviews); it has %d%s",
				approvalName(phase), need, pr, len(approvers), listed(approvers)),
			brief: fmt.Sprintf("needs %d approving reviews; #%d has %d", need, pr, len(approvers)),
		})
	}
	owners := p.Owners.Of(file)
	if len(owners) > 0 && !slices.ContainsFunc(approvers, func(a string) bool {
		return slices.ContainsFunc(owners, func(o string) bool { return strings.EqualFold(a, o) }) // logins ignore case
	}) {
		has := "none"
		if len(approvers) > 0 {
			has = "approving reviews by " + strings.Join(approvers, ", ") + " only"
		}
		what := approvalName(phase)
		if phase == "" {
			what = "a change to it or to the files it names"
		}
		out = append(out, lack{
			why: fmt.Sprintf("%s is owned by %s (--owners-file): %s needs an approving review of #%d's last commit by one of them, with write access and not its author; #%d has %s",
				file, strings.Join(owners, ", "), what, pr, pr, has),
			brief: fmt.Sprintf("needs an approving review by an owner of %s (%s)", file, strings.Join(owners, ", ")),
		})
	}
	return out
}

// ReviewPolicy is how many approving reviews each phase's approval needs,
// by phase name ("cleanup"), from accounts with write access other than
// the pull request's author, given on the pull request's last commit. A
// phase it does not name needs none beyond the merge.
type ReviewPolicy map[string]int

// ParseReviewPolicy reads a policy written as phase=count pairs separated
// by commas: "cleanup=2,cutover=2". phases are the phase names a plan may
// have; a name outside them is an error, as is a count below 1 or above 10.
func ParseReviewPolicy(s string, phases []string) (ReviewPolicy, error) {
	p := ReviewPolicy{}
	for pair := range strings.SplitSeq(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		phase, count, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want phase=count, such as cleanup=2", pair)
		}
		phase = strings.TrimSpace(phase)
		if !slices.Contains(phases, phase) {
			return nil, fmt.Errorf("%q: no phase %q; phases are %s", pair, phase, strings.Join(phases, ", "))
		}
		n, err := strconv.Atoi(strings.TrimSpace(count))
		if err != nil || n < 1 || n > 10 {
			return nil, fmt.Errorf("%q: the count must be a number from 1 to 10", pair)
		}
		p[phase] = n
	}
	return p, nil
}

// String is the policy as ParseReviewPolicy reads it, phases sorted.
func (p ReviewPolicy) String() string {
	var pairs []string
	for phase, n := range p {
		pairs = append(pairs, phase+"="+strconv.Itoa(n))
	}
	slices.Sort(pairs)
	return strings.Join(pairs, ",")
}

// reviewApprovers are the accounts whose reviews count for pull request pr: the
// last review of each approves pr's head commit (forge.Approvers), and the
// forge says they may write to the repository.
func reviewApprovers(ctx context.Context, fg forge.Forge, pr forge.PullRequest) ([]string, error) {
	r, ok := fg.(forge.Reviewer)
	if !ok {
		return nil, fmt.Errorf("the review policy (--required-reviews, --owners-file) needs the forge's reviews, which it does not list")
	}
	reviews, err := r.Reviews(ctx, pr.Number)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, login := range forge.Approvers(reviews, pr.Author, pr.HeadSHA) {
		perm, err := fg.Permission(ctx, login)
		if err != nil {
			return nil, err
		}
		if forge.CanWrite(perm) {
			out = append(out, login)
		}
	}
	return out, nil
}
