package reconciler

// The review policy: how many approving reviews a phase's approval needs.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ferry-dev/ferry/internal/forge"
)

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
		return nil, fmt.Errorf("the review policy needs the forge's reviews, which it does not list")
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
