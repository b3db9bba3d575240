package gitserver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCreateRepo(t *testing.T) {
	ctx := context.Background()
	seed := t.TempDir()
	if err := os.MkdirAll(filepath.Join(seed, "plans"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(seed, "plans", "a.yaml"), []byte("kind: MigrationPlan\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// headOf seeds a repository on a fresh server and returns its main commit.
	headOf := func(t *testing.T) string {
		srv, err := New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		dir, err := srv.CreateRepo(ctx, "plans", seed)
		if err != nil {
			t.Fatal(err)
		}
		head, err := runGit(ctx, nil, "--git-dir", dir, "rev-parse", "refs/heads/main")
		if err != nil {
			t.Fatal(err)
		}
		files, err := runGit(ctx, nil, "--git-dir", dir, "ls-tree", "-r", "--name-only", "main")
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(files) != "plans/a.yaml" {
			t.Errorf("seeded tree holds %q; want plans/a.yaml", files)
		}
		return strings.TrimSpace(head)
	}
	if a, b := headOf(t), headOf(t); a != b {
		t.Errorf("the same seed gave commits %s and %s; want one commit ID", a, b)
	}

	srv, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir, err := srv.CreateRepo(ctx, "empty", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runGit(ctx, nil, "--git-dir", dir, "rev-parse", "--verify", "--quiet", "refs/heads/main"); err == nil {
		t.Error("a repository created without a seed has a main branch; want no commits")
	}
	if _, err := srv.CreateRepo(ctx, "empty", ""); !errors.Is(err, os.ErrExist) {
		t.Errorf("creating a repository twice: %v; want an error wrapping os.ErrExist", err)
	}
	if _, err := srv.CreateRepo(ctx, "missing-seed", filepath.Join(t.TempDir(), "nope")); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("seeding from a missing directory: %v; want an error naming it", err)
	}
}

func TestNewRejectsMissingRoot(t *testing.T) {
	root := filepath.Join(t.TempDir(), "missing")
	if _, err := New(root); err == nil || !strings.Contains(err.Error(), root) {
		t.Errorf("New(%s): %v; want an error naming the directory", root, err)
	}
}
