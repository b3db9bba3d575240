// Package forge talks to the Git forge (GitHub and GitHub Enterprise through
// go-github; Gitea and Forgejo through Gitea's SDK): preview and progress
// comments on pull requests, commit statuses, who merged the pull request
// that approved a phase, the comments people write and their permissions.
//
// GitHub and Gitea are the clients: one API call per operation, errors wrapped with the
// operation and typed by what happens next (failure.Terminal for answers
// that retrying cannot fix; RetryAfter for rate limits). Coalescer wraps any
// Forge for the reconciler loop: it accepts comment and status updates
// without blocking, sends only the latest of each at most once per interval,
// and retries rate limits and server errors in the background. Comment frames
// the bodies that the reconciler renders, so they can be golden-tested.
//
// It owns the forge's API: one Forge interface whatever the forge, the
// rule that only a merged pull request approves (ApprovingPullRequest),
// who may give `/ferry` commands (CanWrite), which comments are ferry's
// (those written by the token's account, Login: anyone who may comment
// can write a marker), the forge's size limits, and the rate limits.
//
// It must not import the reconciler, the planner, the status, the bus,
// the observer or an executor: what to comment or which status to set is
// the reconciler's to decide. Nor may it import internal/gitsource or
// go-git: the forge is reached through its API only, and Git itself is
// internal/gitsource's (internal/layering's rules "Git and the forge are
// clients, not the loop").
package forge
