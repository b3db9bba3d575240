package forge

import (
	"context"
	"errors"
	"time"
)

// Forge is what the reconciler needs from the forge that hosts the plans
// repository. Reads are synchronous and return errors to the caller, which
// polls again; writes are level-based (the latest body or status wins), so a
// caller may repeat them freely.
type Forge interface {
	// PullRequestsForCommit returns the pull requests associated with the
	// commit sha: the merged one that introduced it to the default branch
	// and, while it is not there yet, the open ones that contain it. Merged
	// pull requests carry MergedBy (see ApprovingPullRequest).
	PullRequestsForCommit(ctx context.Context, sha string) ([]PullRequest, error)
	// OpenPullRequests returns every open pull request with the files it
	// changes, so that the reconciler can preview the ones that touch plans.
	OpenPullRequests(ctx context.Context) ([]PullRequest, error)
	// UpsertComment keeps one comment per (pull request, key): it edits the
	// comment of Login's account that carries Marker(key) in place, or
	// creates it; another account's comment with the marker is left alone.
	// body gets the marker when it lacks it and is cut to stay under
	// MaxCommentLength. Keys are short identifiers such as "plan/prod-eu1"
	// (letters, digits and . _ / : -).
	UpsertComment(ctx context.Context, pr int, key, body string) error
	// SetStatus sets the commit status statusContext of sha. state is one
	// of StatePending, StateSuccess, StateFailure, StateError; description
	// is cut to MaxStatusDescription characters.
	SetStatus(ctx context.Context, sha, statusContext, state, description, targetURL string) error
	// Permission returns the permission of the account login on the
	// repository: PermissionAdmin, PermissionWrite, PermissionRead or
	// PermissionNone (also for an account that does not exist). The
	// forge's finer roles fold into these: GitHub's maintain and Gitea's
	// owner count as admin or write as below.
	Permission(ctx context.Context, login string) (string, error)
	// PullRequestComments returns the comments on pull request pr, oldest
	// first (at most 500), for the commands people write there.
	PullRequestComments(ctx context.Context, pr int) ([]IssueComment, error)
	// Login returns the login of the account the token authenticates as:
	// the author of ferry's comments, and of no other (compare with
	// SameLogin). Anyone who may comment can write ferry's markers;
	// only a comment by this account is ferry's. Asked of the forge on
	// first use and remembered.
	Login(ctx context.Context) (string, error)
}

var (
	_ Forge = (*GitHub)(nil)
	_ Forge = (*Gitea)(nil)
	_ Forge = (*Coalescer)(nil)
)

// Permissions of an account on the repository, as Permission returns them,
// from most to least.
const (
	PermissionAdmin = "admin"
	PermissionWrite = "write"
	PermissionRead  = "read"
	PermissionNone  = "none"
)

// CanWrite reports whether permission allows pushing to the repository and
// merging pull requests.
func CanWrite(permission string) bool {
	return permission == PermissionAdmin || permission == PermissionWrite
}

// IssueComment is a comment on a pull request's conversation.
type IssueComment struct {
	ID int64
	// Author is the login of who wrote it.
	Author  string
	Body    string
	Created time.Time
}

// Commit status states, as GitHub and Gitea name them.
const (
	StatePending = "pending"
	StateSuccess = "success"
	StateFailure = "failure"
	StateError   = "error"
)

// MaxStatusDescription is the longest description GitHub accepts on a commit
// status, in characters.
const MaxStatusDescription = 140

// ErrClosed is returned by a Coalescer's writes after Close.
var ErrClosed = errors.New("forge: coalescer closed")

// PullRequest is the part of a pull request that ferry reads.
type PullRequest struct {
	Number int
	// State is "open" or "closed" (a merged pull request is closed).
	State  string
	Merged bool
	// MergedBy is the login of who merged the pull request: for ferry, the
	// approver of the phases the merge approved. Empty when not merged, or
	// when the account no longer exists.
	MergedBy string
	HeadSHA  string
	// BaseRef is the branch the pull request targets, such as "main".
	BaseRef string
	// MergeCommitSHA is the commit the merge created on BaseRef (for a
	// squash or rebase merge, the last commit written there).
	MergeCommitSHA string
	Title          string
	// URL is the pull request's page (html_url), for links in statuses.
	URL string
	// Author is the login of who opened the pull request.
	Author string
	// Fork is true when the pull request's head branch is not in the
	// repository itself: a fork's, or one whose repository is gone.
	Fork bool
	// Files are the paths the pull request changes, in GitHub's order; a
	// renamed file is listed under its new and its previous path. Filled by
	// OpenPullRequests only.
	Files []string
}

// ApprovingPullRequest picks, among the pull requests associated with the
// commit sha, the one merged into branch (the branch ferry tracks) whose
// merge produced sha; failing that, the first one merged into branch (sha
// came in with it but was not its last commit). ok is false when none of
// them was merged into branch: then nobody approved sha through a pull
// request. A pull request merged into another branch approves nothing,
// even when its merge commit is later pushed to branch: the review was of
// a change to that other branch, and the push that brought it here was
// not reviewed.
func ApprovingPullRequest(prs []PullRequest, sha, branch string) (pr PullRequest, ok bool) {
	into := func(p PullRequest) bool { return p.Merged && p.BaseRef == branch }
	for _, p := range prs {
		if into(p) && p.MergeCommitSHA == sha {
			return p, true
		}
	}
	for _, p := range prs {
		if into(p) {
			return p, true
		}
	}
	return PullRequest{}, false
}
