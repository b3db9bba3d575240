// Package gitsource is ferry's Git, with go-git (http(s), ssh, file): a
// Source reads the repository of migration plans and hands the planner a
// revision and a read-only fs.FS of the repository at that revision; a
// Branch reads and writes one branch: it commits ferry's own files (the
// plans' statuses) to it and reads them back. Both take the same Auth.
// Both skip the fetch when the remote head has not moved. A webhook only
// triggers an early poll; polling stays the source of truth.
//
// A Source follows one branch. Poll asks the remote for the branch head
// (like `git ls-remote`) and fetches only when the head is a commit the
// local cache does not hold, so an idle repository costs one small request
// per poll. Stats counts both kinds of request for metrics.
//
// FS reads the tree of a revision from the object store, not a worktree,
// so that a plan and the manifests it names are read at the same commit.
// Introduced walks the branch's first-parent history to find the commit
// (usually the merge of a pull request) that brought a file into its
// current state: that commit says who approved a phase. IsFerryCommit
// recognises ferry's own status commits, which the reconciler ignores.
//
// A Branch builds its commits from objects, without a worktree, on a
// shallow cache of its branch alone, and pushes without force: a push
// rejected because someone pushed first is rebuilt on their commit and
// pushed again.
//
// Credentials are read from files on every poll, so rotated secrets need
// no restart, and never appear in errors or logs: URLs are shown with
// their user information redacted (RedactURL). SSH host keys are checked
// against a known_hosts file; running without one takes an explicit
// insecure option.
//
// It owns everything ferry does with Git, and only that: the clones and
// their caches, authentication, the first-parent history an approval is
// read from, the heads of open pull requests that previews plan from
// (PullHeads, FetchPull), and the forges' webhooks as far as they ask for
// an early poll (ForgeWebhookHandler, checked against the shared secret).
// What a file means is the caller's: plans are internal/planfile's, status
// files internal/status/statusfile's.
//
// It must not import the reconciler, the planner, the status, the bus,
// the observer or an executor: what to read or commit is the reconciler's
// to decide. Nor may it import internal/forge or a forge's SDK: Git is
// read and written the same way whatever the forge, whose API is
// internal/forge's (internal/layering's rules "Git and the forge are
// clients, not the loop").
package gitsource
