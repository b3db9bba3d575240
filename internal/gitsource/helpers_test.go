package gitsource_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/ferry-dev/ferry/internal/gitsource"
)

// seedPlans returns a directory holding plans/ with the example plans of
// the repository, to seed a test Git server with.
func seedPlans(t *testing.T) string {
	t.Helper()
	seed := t.TempDir()
	files, err := filepath.Glob("../../plans/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("example plans: %v (found %d)", err, len(files))
	}
	if err := os.MkdirAll(filepath.Join(seed, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(seed, "plans", filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return seed
}

// exampleFile returns an example plan's contents.
func exampleFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../plans", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// epoch is the time of the first test commit; fixed times keep commit IDs
// the same from run to run.
var epoch = time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)

// clone is a working copy of a test server's repository that commits and
// pushes with go-git, as a person using the forge would.
type clone struct {
	t    *testing.T
	repo *git.Repository
	wt   *git.Worktree
	dir  string
	n    int
}

func cloneRepo(t *testing.T, url string) *clone {
	t.Helper()
	dir := t.TempDir()
	repo, err := git.PlainCloneContext(t.Context(), dir, false, &git.CloneOptions{URL: url})
	if err != nil {
		t.Fatalf("clone %s: %v", url, err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	return &clone{t: t, repo: repo, wt: wt, dir: dir}
}

// write changes one file in the working copy and stages it.
func (c *clone) write(name, content string) {
	c.t.Helper()
	p := filepath.Join(c.dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.wt.Add(name); err != nil {
		c.t.Fatalf("add %s: %v", name, err)
	}
}

// commit commits what is staged, with parents when given (a merge), a
// minute after the previous commit. The author is named after the message,
// so that a failure shows which commit was returned.
func (c *clone) commit(msg string, parents ...gitsource.Revision) gitsource.Revision {
	c.t.Helper()
	c.n++
	subject, _, _ := strings.Cut(msg, "\n")
	sig := &object.Signature{Name: "Dev " + subject, Email: "dev@ferry.invalid", When: epoch.Add(time.Duration(c.n) * time.Minute)}
	opts := &git.CommitOptions{Author: sig, Committer: sig}
	for _, p := range parents {
		opts.Parents = append(opts.Parents, plumbing.NewHash(string(p)))
	}
	h, err := c.wt.Commit(msg, opts)
	if err != nil {
		c.t.Fatalf("commit %q: %v", msg, err)
	}
	return gitsource.Revision(h.String())
}

// change writes one file and commits it.
func (c *clone) change(name, content, msg string) gitsource.Revision {
	c.t.Helper()
	c.write(name, content)
	return c.commit(msg)
}

// checkout switches to a branch, creating it at HEAD when asked.
func (c *clone) checkout(branch string, create bool) {
	c.t.Helper()
	err := c.wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName(branch), Create: create})
	if err != nil {
		c.t.Fatalf("checkout %s: %v", branch, err)
	}
}

// push pushes main.
func (c *clone) push() {
	c.t.Helper()
	err := c.repo.PushContext(c.t.Context(), &git.PushOptions{RefSpecs: []config.RefSpec{"refs/heads/main:refs/heads/main"}})
	if err != nil {
		c.t.Fatalf("push: %v", err)
	}
}

// serverHead returns the head of main in a bare repository on disk.
func serverHead(t *testing.T, dir string) gitsource.Revision {
	t.Helper()
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := repo.Reference(plumbing.NewBranchReferenceName("main"), true)
	if err != nil {
		t.Fatal(err)
	}
	return gitsource.Revision(ref.Hash().String())
}

// newSource returns a Source for url with a fresh cache.
func newSource(t *testing.T, url string) *gitsource.Source {
	t.Helper()
	src, err := gitsource.New(gitsource.Config{URL: url, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatalf("new source: %v", err)
	}
	return src
}

// poll polls and fails the test on error.
func poll(t *testing.T, src *gitsource.Source) (gitsource.Revision, bool) {
	t.Helper()
	rev, changed, err := src.Poll(t.Context())
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	return rev, changed
}

// pushPull pushes HEAD to refs/pull/n/head, as GitHub publishes a pull
// request's head on the base repository.
func (c *clone) pushPull(n int) {
	c.t.Helper()
	head, err := c.repo.Head()
	if err != nil {
		c.t.Fatal(err)
	}
	spec := config.RefSpec(fmt.Sprintf("+%s:refs/pull/%d/head", head.Name(), n))
	if err := c.repo.PushContext(c.t.Context(), &git.PushOptions{RefSpecs: []config.RefSpec{spec}}); err != nil {
		c.t.Fatalf("push pull request %d: %v", n, err)
	}
}
