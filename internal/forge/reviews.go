// The reviews of a pull request, for a review policy that asks how many
// people approved a merge.

package forge

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"code.gitea.io/sdk/gitea"
	"github.com/google/go-github/v60/github"

	"github.com/ferry-dev/ferry/internal/failure"
)

// Review is one review of a pull request.
type Review struct {
	// Author is the reviewer's login.
	Author string
	// State is ReviewApproved, ReviewChangesRequested, or another state
	// (commented, dismissed, pending), upper case as the forge names it.
	State string
	// Commit is the head commit the review was given on.
	Commit    string
	Submitted time.Time
	// Stale or Dismissed: the forge no longer counts it (Gitea marks a
	// review stale when the head moved after it; GitHub says DISMISSED).
	Stale bool
}

// Review states ferry reads.
const (
	ReviewApproved         = "APPROVED"
	ReviewChangesRequested = "CHANGES_REQUESTED"
)

// Reviewer is a forge that lists a pull request's reviews.
type Reviewer interface {
	// Reviews lists pull request pr's reviews, oldest first (at most 500).
	Reviews(ctx context.Context, pr int) ([]Review, error)
}

var (
	_ Reviewer = (*GitHub)(nil)
	_ Reviewer = (*Gitea)(nil)
	_ Reviewer = (*Coalescer)(nil)
)

// maxReviewPages bounds a listing of reviews: 5 pages of perPage.
const maxReviewPages = 5

// Reviews lists pull request pr's reviews on GitHub.
func (g *GitHub) Reviews(ctx context.Context, pr int) ([]Review, error) {
	opts := &github.ListOptions{PerPage: perPage}
	var out []Review
	for range maxReviewPages {
		list, resp, err := g.client.PullRequests.ListReviews(ctx, g.owner, g.repo, pr, opts)
		if err != nil {
			return nil, g.fail(err, "list the reviews of #%d", pr)
		}
		for _, r := range list {
			state := strings.ToUpper(r.GetState())
			out = append(out, Review{Author: r.GetUser().GetLogin(), State: state, Commit: r.GetCommitID(),
				Submitted: r.GetSubmittedAt().Time, Stale: state == "DISMISSED"})
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return out, nil
}

// Reviews lists pull request pr's reviews on Gitea. Gitea names a request
// for changes REQUEST_CHANGES; it reads as ReviewChangesRequested.
func (g *Gitea) Reviews(ctx context.Context, pr int) ([]Review, error) {
	opts := gitea.ListPullReviewsOptions{ListOptions: gitea.ListOptions{Page: 1, PageSize: perPage}}
	var out []Review
	for range maxReviewPages {
		list, resp, err := g.api(ctx).ListPullReviews(g.owner, g.repo, int64(pr), opts)
		if err != nil {
			return nil, g.fail(resp, err, "list the reviews of #%d", pr)
		}
		for _, r := range list {
			rv := Review{State: string(r.State), Commit: r.CommitID, Submitted: r.Submitted, Stale: r.Stale || r.Dismissed}
			if r.State == gitea.ReviewStateRequestChanges {
				rv.State = ReviewChangesRequested
			}
			if r.Reviewer != nil {
				rv.Author = r.Reviewer.UserName
			}
			out = append(out, rv)
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return out, nil
}

// Reviews calls the wrapped Forge, which must be a Reviewer.
func (c *Coalescer) Reviews(ctx context.Context, pr int) ([]Review, error) {
	r, ok := c.inner.(Reviewer)
	if !ok {
		return nil, failure.Terminal(errors.New("the forge lists no reviews"))
	}
	return r.Reviews(ctx, pr)
}

// Approvers are the accounts whose last review of pull request pr
// approves its head commit: not stale or dismissed, given on head, and
// not by the pull request's author (who cannot approve their own change).
// The result is sorted.
func Approvers(reviews []Review, author, head string) []string {
	last := map[string]Review{}
	for _, r := range reviews {
		if r.Author == "" || r.State == "PENDING" || r.State == "COMMENTED" || r.State == "COMMENT" {
			continue // a comment neither approves nor takes an approval back
		}
		if prev, ok := last[r.Author]; !ok || !r.Submitted.Before(prev.Submitted) {
			last[r.Author] = r
		}
	}
	var out []string
	for login, r := range last {
		if r.State == ReviewApproved && !r.Stale && r.Commit == head && !SameLogin(login, author) {
			out = append(out, login)
		}
	}
	slices.Sort(out)
	return out
}
