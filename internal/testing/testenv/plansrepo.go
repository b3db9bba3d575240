package testenv

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/ferry-dev/ferry/internal/testing/fakegithub"
)

// PlansRepo acts on a plans repository the way a team does on GitHub:
// commits to main, pull requests opened, pushed to and merged. Git changes
// go to the real Git server; the pull requests' metadata goes to the GitHub
// stand-in, and every action delivers the webhook GitHub would (when
// Webhook is set). Pull request heads are published as refs/pull/N/head,
// as GitHub does.
type PlansRepo struct {
	Git    *Git
	GitHub *fakegithub.Server
	// WebhookURL and WebhookSecret, when set, receive a signed push or
	// pull_request event after each action.
	WebhookURL    string
	WebhookSecret []byte
	// Undelivered, when set, is told of a webhook the receiver did not
	// accept, and the action goes on: GitHub does not retry a failed
	// delivery, and ferry's poll finds the change. When nil, a failed
	// delivery fails the test.
	Undelivered func(event string, err error)

	t    T
	dir  string
	repo *git.Repository
	wt   *git.Worktree
	// prs holds each open pull request's changes (path -> content, ""
	// for a deletion) and its branch.
	prs map[int]*pullRequest
}

type pullRequest struct {
	branch string
	files  map[string]string
	head   string
}

// NewPlansRepo clones g's repository to act on it; gh records the pull
// requests (nil: no forge, pull requests cannot be opened).
func NewPlansRepo(t T, g *Git, gh *fakegithub.Server) *PlansRepo {
	t.Helper()
	dir := t.TempDir()
	repo, err := git.PlainCloneContext(context.Background(), dir, false, &git.CloneOptions{URL: g.URL})
	if err != nil {
		t.Fatalf("testenv: clone plans repository: %v", err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if gh != nil {
		// The stand-in names alice the author of every pull request: she
		// may write, so that previews show the live clusters, as for a
		// maintainer's pull request.
		gh.SetPermission("alice", "write")
	}
	return &PlansRepo{Git: g, GitHub: gh, t: t, dir: dir, repo: repo, wt: wt, prs: map[int]*pullRequest{}}
}

// Commit commits files (path -> content; "" deletes) to main as author and
// pushes it, as a person pushing without a pull request. It returns the
// commit.
func (r *PlansRepo) Commit(msg, author string, files map[string]string) string {
	r.t.Helper()
	r.checkoutMain()
	sha := r.commit(msg, author, files)
	r.push("refs/heads/main:refs/heads/main")
	r.deliver("push", map[string]any{"ref": "refs/heads/main", "after": sha})
	return sha
}

// OpenPR opens pull request n from a branch off main with one commit of
// files by author, and returns its head.
func (r *PlansRepo) OpenPR(n int, title, author string, files map[string]string) string {
	r.t.Helper()
	if r.GitHub == nil {
		r.t.Fatalf("testenv: OpenPR without a GitHub stand-in")
	}
	r.checkoutMain()
	pr := &pullRequest{branch: fmt.Sprintf("pr-%d", n), files: map[string]string{}}
	r.prs[n] = pr
	r.checkout(pr.branch, true)
	r.advance(n, pr, title, author, files)
	r.GitHub.AddPR(fakegithub.PR{Number: n, State: "open", Title: title, Head: pr.head, Base: "main"}, r.changed(pr)...)
	r.deliver("pull_request", r.GitHub.PullRequestEvent(n, "opened"))
	return pr.head
}

// PushPR pushes another commit of files to open pull request n and returns
// its new head.
func (r *PlansRepo) PushPR(n int, msg, author string, files map[string]string) string {
	r.t.Helper()
	pr := r.pr(n)
	r.checkout(pr.branch, false)
	r.advance(n, pr, msg, author, files)
	r.GitHub.Push(n, pr.head, r.changed(pr)...)
	r.deliver("pull_request", r.GitHub.PullRequestEvent(n, "synchronize"))
	return pr.head
}

// MergePR merges pull request n into main with a merge commit, as by
// merges it on GitHub, and returns the merge commit.
func (r *PlansRepo) MergePR(n int, by string) string {
	r.t.Helper()
	pr := r.pr(n)
	r.checkoutMain()
	main, err := r.repo.Head()
	if err != nil {
		r.t.Fatalf("testenv: %v", err)
	}
	sha := r.commit(fmt.Sprintf("Merge pull request #%d from alice/%s", n, pr.branch), by, pr.files,
		main.Hash(), plumbing.NewHash(pr.head))
	r.push("refs/heads/main:refs/heads/main")
	r.GitHub.Merge(n, sha, by)
	delete(r.prs, n)
	r.deliver("pull_request", r.GitHub.PullRequestEvent(n, "closed"))
	r.deliver("push", map[string]any{"ref": "refs/heads/main", "after": sha})
	return sha
}

func (r *PlansRepo) pr(n int) *pullRequest {
	r.t.Helper()
	pr, ok := r.prs[n]
	if !ok {
		r.t.Fatalf("testenv: no open pull request #%d", n)
	}
	return pr
}

// advance commits files on the pull request's branch and publishes it.
func (r *PlansRepo) advance(n int, pr *pullRequest, msg, author string, files map[string]string) {
	r.t.Helper()
	pr.head = r.commit(msg, author, files)
	maps.Copy(pr.files, files)
	r.push(fmt.Sprintf("+refs/heads/%s:refs/heads/%s", pr.branch, pr.branch), fmt.Sprintf("+refs/heads/%s:refs/pull/%d/head", pr.branch, n))
}

// changed lists a pull request's files as GitHub does.
func (r *PlansRepo) changed(pr *pullRequest) []fakegithub.File {
	var out []fakegithub.File
	for _, name := range slices.Sorted(maps.Keys(pr.files)) {
		status := "modified"
		switch {
		case pr.files[name] == "":
			status = "removed"
		case !r.onMain(name):
			status = "added"
		}
		out = append(out, fakegithub.File{Filename: name, Status: status})
	}
	return out
}

// onMain reports whether main holds path.
func (r *PlansRepo) onMain(path string) bool {
	ref, err := r.repo.Reference(plumbing.NewBranchReferenceName("main"), true)
	if err != nil {
		return false
	}
	c, err := r.repo.CommitObject(ref.Hash())
	if err != nil {
		return false
	}
	_, err = c.File(path)
	return err == nil
}

func (r *PlansRepo) checkoutMain() { r.checkout("main", false) }

func (r *PlansRepo) checkout(branch string, create bool) {
	r.t.Helper()
	if err := r.wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName(branch), Create: create, Force: true}); err != nil {
		r.t.Fatalf("testenv: checkout %s: %v", branch, err)
	}
}

// commit writes files and commits them with parents (default: HEAD).
func (r *PlansRepo) commit(msg, author string, files map[string]string, parents ...plumbing.Hash) string {
	r.t.Helper()
	for name, content := range files {
		p := filepath.Join(r.dir, filepath.FromSlash(name))
		if content == "" {
			if _, err := r.wt.Remove(name); err != nil {
				r.t.Fatalf("testenv: remove %s: %v", name, err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatalf("testenv: %v", err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			r.t.Fatalf("testenv: %v", err)
		}
		if _, err := r.wt.Add(name); err != nil {
			r.t.Fatalf("testenv: add %s: %v", name, err)
		}
	}
	sig := &object.Signature{Name: author, Email: author + "@ferry.invalid", When: time.Now()}
	h, err := r.wt.Commit(msg, &git.CommitOptions{Author: sig, Committer: sig, Parents: parents, AllowEmptyCommits: true})
	if err != nil {
		r.t.Fatalf("testenv: commit %q: %v", msg, err)
	}
	return h.String()
}

func (r *PlansRepo) push(specs ...string) {
	r.t.Helper()
	var refspecs []config.RefSpec
	for _, s := range specs {
		refspecs = append(refspecs, config.RefSpec(s))
	}
	err := r.repo.PushContext(context.Background(), &git.PushOptions{RefSpecs: refspecs})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		r.t.Fatalf("testenv: push %v: %v", specs, err)
	}
}

// deliver sends the webhook GitHub would send, when one is configured.
func (r *PlansRepo) deliver(event string, payload any) {
	r.t.Helper()
	if r.WebhookURL == "" {
		return
	}
	// GitHub gives up on a delivery after 10 s.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code, err := fakegithub.Deliver(ctx, r.WebhookURL, r.WebhookSecret, event, payload)
	if err == nil && code != 202 {
		err = fmt.Errorf("status %d", code)
	}
	switch {
	case err == nil:
	case r.Undelivered != nil:
		r.Undelivered(event, err)
	default:
		r.t.Fatalf("testenv: deliver %s webhook: %v", event, err)
	}
}
