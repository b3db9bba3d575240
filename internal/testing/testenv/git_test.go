package testenv_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestGit proves the Git server is real: a clone over http:// holds the seed
// files, a commit pushed with go-git lands in the bare repository on disk, and
// another clone fetches exactly that commit back.
func TestGit(t *testing.T) {
	const seed = "testdata/seed"
	g := testenv.StartGit(t, seed)
	ctx := t.Context()

	work := t.TempDir()
	repo, err := git.PlainCloneContext(ctx, work, false, &git.CloneOptions{URL: g.URL})
	if err != nil {
		t.Fatalf("clone %s: %v", g.URL, err)
	}
	want, err := os.ReadFile(filepath.Join(seed, "plans", "capi-quickstart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(work, "plans", "capi-quickstart.yaml")); err != nil || string(got) != string(want) {
		t.Fatalf("cloned plans/capi-quickstart.yaml = %q, %v; want the seed file", got, err)
	}
	seedHead, err := repo.Head()
	if err != nil {
		t.Fatal(err)
	}

	// A second clone, made before the push, that will fetch it.
	other, err := git.PlainCloneContext(ctx, t.TempDir(), true, &git.CloneOptions{URL: g.URL})
	if err != nil {
		t.Fatalf("second clone: %v", err)
	}

	const content = "apiVersion: ferry.dev/v1alpha1\nkind: MigrationPlan\nmetadata: {name: pushed}\n"
	if err := os.WriteFile(filepath.Join(work, "plans", "pushed.yaml"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wt.Add("plans/pushed.yaml"); err != nil {
		t.Fatal(err)
	}
	pushed, err := wt.Commit("Add plan pushed", &git.CommitOptions{
		Author: &object.Signature{Name: "Test", Email: "test@ferry.invalid", When: time.Unix(1767225600, 0)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.PushContext(ctx, &git.PushOptions{}); err != nil {
		t.Fatalf("push: %v", err)
	}

	// The server stored the commit: ask git itself, in the bare repository.
	out, err := exec.Command("git", "--git-dir", g.Dir, "rev-parse", "refs/heads/main").Output()
	if err != nil {
		t.Fatalf("git rev-parse in %s: %v", g.Dir, err)
	}
	if got := strings.TrimSpace(string(out)); got != pushed.String() {
		t.Fatalf("server's main is %s; want the pushed commit %s", got, pushed)
	}

	if err := other.FetchContext(ctx, &git.FetchOptions{}); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	ref, err := other.Reference(plumbing.NewRemoteReferenceName("origin", "main"), true)
	if err != nil {
		t.Fatal(err)
	}
	if ref.Hash() != pushed {
		t.Fatalf("fetched origin/main %s; want %s", ref.Hash(), pushed)
	}
	commit, err := other.CommitObject(ref.Hash())
	if err != nil {
		t.Fatal(err)
	}
	if len(commit.ParentHashes) != 1 || commit.ParentHashes[0] != seedHead.Hash() {
		t.Errorf("fetched commit has parents %v; want the seed commit %s", commit.ParentHashes, seedHead.Hash())
	}
	f, err := commit.File("plans/pushed.yaml")
	if err != nil {
		t.Fatalf("fetched commit: %v", err)
	}
	if got, _ := f.Contents(); got != content {
		t.Errorf("fetched plans/pushed.yaml = %q; want %q", got, content)
	}

	if err := other.FetchContext(ctx, &git.FetchOptions{}); !errors.Is(err, git.NoErrAlreadyUpToDate) {
		t.Errorf("second fetch: %v; want %v", err, git.NoErrAlreadyUpToDate)
	}
}
