package testenv

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/testing/gitserver"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Git is a running Git server with one bare repository.
type Git struct {
	// URL is the repository's http:// URL, for go-git or git.
	URL string
	// Dir is the bare repository on disk, for checking what a push stored.
	Dir string
	// Server serves the repositories; CreateRepo adds more next to Dir.
	Server *gitserver.Server
	// BaseURL is where the server listens; a repository created with
	// Server.CreateRepo(name) is at BaseURL + "/" + name + ".git".
	BaseURL string
}

// StartGit serves a bare repository named "plans" over http:// on a random
// port, seeded with the files under seed (none when seed is empty).
func StartGit(t T, seed string) *Git {
	t.Helper()
	srv, err := gitserver.New(t.TempDir())
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	dir, err := srv.CreateRepo(context.Background(), "plans", seed)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &Git{URL: hs.URL + "/plans.git", Dir: dir, Server: srv, BaseURL: hs.URL}
}

// SeedDir writes files (path -> content) under a new temporary directory
// and returns it, to seed StartGit with.
func SeedDir(t T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatalf("testenv: %v", err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatalf("testenv: %v", err)
		}
	}
	return dir
}

// Run runs git on the server's bare repository and returns its output,
// trimmed: what the server stored, as Git itself reads it.
func (g *Git) Run(t T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"--git-dir", g.Dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// Push commits files (path -> content) to branch from a clone of its own,
// as a person would, with the message "Notes from a person" by Alice, and
// pushes; it returns the commit.
func (g *Git) Push(t T, branch string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	repo, err := git.PlainClone(dir, false, &git.CloneOptions{
		URL: g.URL, ReferenceName: plumbing.NewBranchReferenceName(branch), SingleBranch: true,
	})
	if err != nil {
		t.Fatalf("testenv: clone branch %s: %v", branch, err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatalf("testenv: %v", err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatalf("testenv: %v", err)
		}
		if _, err := wt.Add(name); err != nil {
			t.Fatalf("testenv: add %s: %v", name, err)
		}
	}
	h, err := wt.Commit("Notes from a person", &git.CommitOptions{
		Author: &object.Signature{Name: "Alice", Email: "alice@ferry.invalid", When: time.Now()},
	})
	if err != nil {
		t.Fatalf("testenv: commit: %v", err)
	}
	if err := repo.Push(&git.PushOptions{}); err != nil {
		t.Fatalf("testenv: push to %s: %v", branch, err)
	}
	return h.String()
}
