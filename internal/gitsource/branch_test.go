package gitsource_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// files makes Write's files from path -> content.
func files(m map[string]string) []gitsource.File {
	var out []gitsource.File
	for p, c := range m {
		out = append(out, gitsource.File{Path: p, Content: func() ([]byte, error) { return []byte(c), nil }})
	}
	return out
}

func subject(changed []string) string { return "write " + strings.Join(changed, ", ") }

// TestBranch: the first write creates the branch (an orphan) with ferry's
// trailer; a write of the same content makes no commit; the subject names
// the changed paths only; ReadFile and ReadDir give back what is there and
// say when a file or the branch does not exist; bad paths are refused.
func TestBranch(t *testing.T) {
	g := testenv.StartGit(t, "")
	ctx := t.Context()
	br := &gitsource.Branch{URL: g.URL, Name: "notes", CacheDir: t.TempDir()}
	if _, err := br.ReadFile(ctx, "a"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile before the branch exists = %v; want fs.ErrNotExist", err)
	}
	first, err := br.Write(ctx, files(map[string]string{"d/a": "1", "d/b": "2", "c": "3"}), subject)
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Run(t, "log", "-1", "--format=%s|%P|%(trailers:key=Ferry-Status,valueonly)", first); got != "write c, d/a, d/b||true" {
		t.Errorf("first commit: %q; want subject, no parent, the trailer", got)
	}
	second, err := br.Write(ctx, files(map[string]string{"d/a": "1", "d/b": "two"}), subject)
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Run(t, "log", "-1", "--format=%s|%P", second); got != "write d/b|"+first {
		t.Errorf("second commit: %q; want the changed path only, on %s", got, first)
	}
	if c, err := br.Write(ctx, files(map[string]string{"d/a": "1"}), subject); c != "" || err != nil {
		t.Errorf("write of unchanged content = %q, %v; want no commit", c, err)
	}
	if data, err := br.ReadFile(ctx, "d/b"); err != nil || string(data) != "two" {
		t.Errorf("ReadFile(d/b) = %q, %v", data, err)
	}
	if _, err := br.ReadFile(ctx, "d/x"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile(d/x) = %v; want fs.ErrNotExist", err)
	}
	var read []string
	err = br.ReadDir(ctx, "d", func(name string, data []byte) error {
		read = append(read, name+"="+string(data))
		return nil
	})
	if err != nil || !slices.Equal(read, []string{"a=1", "b=two"}) {
		t.Errorf("ReadDir(d) = %v, %v", read, err)
	}
	for _, bad := range []string{"", "/abs", "../up", "d/../c", "d/"} {
		if _, err := br.Write(ctx, files(map[string]string{bad: "x"}), subject); err == nil {
			t.Errorf("write of path %q: no error", bad)
		}
	}
	if _, err := (&gitsource.Branch{URL: g.URL}).Write(ctx, files(map[string]string{"a": "1"}), subject); err == nil {
		t.Error("write without a branch: no error")
	}
}

// TestBranchRace: a person pushes between ferry's fetch and its push. The
// push is rejected; ferry fetches, re-applies its files on the person's
// commit and pushes again: the person's other files survive, and in the
// files ferry writes its version wins.
func TestBranchRace(t *testing.T) {
	g := testenv.StartGit(t, "")
	ctx := t.Context()
	br := &gitsource.Branch{URL: g.URL, Name: "notes", CacheDir: t.TempDir()}
	if _, err := br.Write(ctx, files(map[string]string{"s/a": "1"}), subject); err != nil {
		t.Fatal(err)
	}
	var attempts []int
	var human string
	gitsource.BeforePush(br, func(attempt int) {
		attempts = append(attempts, attempt)
		if attempt == 1 {
			human = g.Push(t, "notes", map[string]string{"NOTES.md": "Monday.\n", "s/a": "edited by hand"})
		}
	})
	commit, err := br.Write(ctx, files(map[string]string{"s/a": "2"}), subject)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(attempts, []int{1, 2}) {
		t.Errorf("push attempts %v; want a rejected first push and a second", attempts)
	}
	if got := g.Run(t, "log", "-1", "--format=%P", commit); got != human {
		t.Errorf("ferry's commit has parents %q; want the person's %s", got, human)
	}
	if got := g.Run(t, "show", commit+":NOTES.md") + "|" + g.Run(t, "show", commit+":s/a"); got != "Monday.|2" {
		t.Errorf("after the race the branch holds %q; want the person's note and ferry's s/a", got)
	}
}

// TestBranchGivesUp: a branch that moves before every push makes Write
// fail after a few attempts rather than loop.
func TestBranchGivesUp(t *testing.T) {
	gitsource.FastRetries(t.Cleanup)
	g := testenv.StartGit(t, testenv.SeedDir(t, map[string]string{"README": "x\n"}))
	br := &gitsource.Branch{URL: g.URL, Name: "main"}
	n := 0
	gitsource.BeforePush(br, func(int) {
		n++
		g.Push(t, "main", map[string]string{"NOTES.md": strings.Repeat("busy\n", n)})
	})
	_, err := br.Write(t.Context(), files(map[string]string{"s/a": "1"}), subject)
	if err == nil || !strings.Contains(err.Error(), "rejected 5 times") || n != gitsource.PushAttempts {
		t.Errorf("Write = %v after %d pushes; want it to give up after %d", err, n, gitsource.PushAttempts)
	}
}

// TestBranchCompacts: once the Branch stored enough objects in its cache it
// drops the cache after a push and fetches the branch's head afresh,
// shallow: the loose objects are gone, and the next commit still builds on
// the branch's head.
func TestBranchCompacts(t *testing.T) {
	gitsource.CompactAfter(8, t.Cleanup)
	g := testenv.StartGit(t, "")
	ctx := t.Context()
	cache := t.TempDir()
	br := &gitsource.Branch{URL: g.URL, Name: "notes", CacheDir: cache}
	loose := func() int {
		n := 0
		_ = filepath.WalkDir(filepath.Join(cache, "objects"), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && len(filepath.Base(filepath.Dir(p))) == 2 {
				n++
			}
			return nil
		})
		return n
	}
	first, err := br.Write(ctx, files(map[string]string{"s/a": "a", "s/b": "b", "s/c": "c"}), subject) // 3 blobs, 2 trees, 1 commit
	if err != nil {
		t.Fatal(err)
	}
	if n := loose(); n != 6 {
		t.Fatalf("after the first write the cache holds %d loose objects; want 6", n)
	}
	second, err := br.Write(ctx, files(map[string]string{"s/b": "2"}), subject) // 4 more: 10, the cache is dropped
	if err != nil {
		t.Fatal(err)
	}
	if n := loose(); n != 0 {
		t.Errorf("after 10 objects the cache still holds %d loose objects; want it dropped", n)
	}
	third, err := br.Write(ctx, files(map[string]string{"s/c": "3"}), subject)
	if err != nil {
		t.Fatalf("write after the cache was dropped: %v", err)
	}
	if shallow, err := os.ReadFile(filepath.Join(cache, "shallow")); err != nil || strings.TrimSpace(string(shallow)) != second {
		t.Errorf("the cache's shallow file = %q, %v; want the head it fetched, %s", shallow, err, second)
	}
	if got := g.Run(t, "log", "--format=%H", "-3", third); got != strings.Join([]string{third, second, first}, "\n") {
		t.Errorf("history %q; want third on second on first", got)
	}
	if data, err := br.ReadFile(ctx, "s/b"); err != nil || string(data) != "2" {
		t.Errorf("ReadFile(s/b) after the cache was dropped = %q, %v", data, err)
	}
}
