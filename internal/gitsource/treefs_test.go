package gitsource_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/planfile"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestFSAtRevisions reads the tree at an old and a new revision after both
// were fetched: each shows its own files.
func TestFSAtRevisions(t *testing.T) {
	g := testenv.StartGit(t, seedPlans(t))
	src := newSource(t, g.URL)
	old, _ := poll(t, src)

	c := cloneRepo(t, g.URL)
	c.write("plans/capi-quickstart.yaml", testenv.ExamplePlan(t, "cluster"))
	c.write("manifests/ccm.yaml", "kind: ConfigMap\n")
	c.commit("Approve cluster")
	c.push()
	cur, changed := poll(t, src)
	if !changed {
		t.Fatal("poll after push: unchanged")
	}

	oldFS, err := src.FS(old)
	if err != nil {
		t.Fatal(err)
	}
	curFS, err := src.FS(cur)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		fsys fs.FS
		path string
		want string // "" for a file that must not exist
	}{
		{"old plan", oldFS, "plans/capi-quickstart.yaml", exampleFile(t, "capi-quickstart.yaml")},
		{"new plan", curFS, "plans/capi-quickstart.yaml", testenv.ExamplePlan(t, "cluster")},
		{"old manifest", oldFS, "manifests/ccm.yaml", ""},
		{"new manifest", curFS, "manifests/ccm.yaml", "kind: ConfigMap\n"},
		{"unchanged plan", curFS, "plans/kamaji-quickstart.yaml", exampleFile(t, "kamaji-quickstart.yaml")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fs.ReadFile(tc.fsys, tc.path)
			if tc.want == "" {
				if !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("read %s = %q, %v; want fs.ErrNotExist", tc.path, got, err)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("read %s = %.60q…, %v; want %.60q…", tc.path, got, err, tc.want)
			}
		})
	}

	// The whole of io/fs's contract, checked by the standard library.
	if err := fstest.TestFS(curFS, "plans/capi-quickstart.yaml", "plans/kamaji-quickstart.yaml",
		"plans/vsphere-workers.yaml", "manifests/ccm.yaml"); err != nil {
		t.Fatal(err)
	}
}

// TestFSLoadsPlans runs the planner's loader over the tree, as the
// reconciler does.
func TestFSLoadsPlans(t *testing.T) {
	g := testenv.StartGit(t, seedPlans(t))
	src := newSource(t, g.URL)
	rev, _ := poll(t, src)
	fsys, err := src.FS(rev)
	if err != nil {
		t.Fatal(err)
	}
	files, err := planfile.LoadFS(fsys, src.PlansDir())
	if err != nil {
		t.Fatalf("load plans at %s: %v", rev.Short(), err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Path+"="+f.Plan.Metadata.Name)
	}
	want := []string{
		"plans/capi-quickstart.yaml=capi-quickstart",
		"plans/kamaji-quickstart.yaml=kamaji-quickstart",
		"plans/vsphere-gateway.yaml=vsphere-gateway",
		"plans/vsphere-workers.yaml=vsphere-workers",
	}
	if !slices.Equal(names, want) {
		t.Fatalf("loaded %v; want %v", names, want)
	}
}

// TestFSErrors checks the answers for what is not a readable file.
func TestFSErrors(t *testing.T) {
	g := testenv.StartGit(t, seedPlans(t))
	src := newSource(t, g.URL)
	rev, _ := poll(t, src)
	fsys, err := src.FS(rev)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want error
	}{
		{"plans/missing.yaml", fs.ErrNotExist},
		{"missing/plan.yaml", fs.ErrNotExist},
		{"plans/capi-quickstart.yaml/x", fs.ErrNotExist},
		{"/plans", fs.ErrInvalid},
		{"plans/../plans", fs.ErrInvalid},
	} {
		t.Run(tc.path, func(t *testing.T) {
			_, err := fs.ReadFile(fsys, tc.path)
			var pe *fs.PathError
			if !errors.Is(err, tc.want) || !errors.As(err, &pe) {
				t.Fatalf("read %s: %v; want a PathError for %v", tc.path, err, tc.want)
			}
		})
	}
	if _, err := fs.ReadFile(fsys, "plans"); err == nil {
		t.Error("read of a directory succeeded")
	}
	if _, err := fs.ReadDir(fsys, "plans/capi-quickstart.yaml"); err == nil {
		t.Error("read dir of a file succeeded")
	}
	for _, rev := range []gitsource.Revision{"", "main", "0123456789012345678901234567890123456789"} {
		if _, err := src.FS(rev); !errors.Is(err, gitsource.ErrUnknownRevision) {
			t.Errorf("FS(%q): %v; want %v", rev, err, gitsource.ErrUnknownRevision)
		}
	}
}

// TestFSSymlink lists a symbolic link but does not follow it: its target
// could be outside what the plans directory's reviewers looked at.
func TestFSSymlink(t *testing.T) {
	g := testenv.StartGit(t, seedPlans(t))
	c := cloneRepo(t, g.URL)
	if err := os.Symlink("capi-quickstart.yaml", filepath.Join(c.dir, "plans", "link.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.wt.Add("plans/link.yaml"); err != nil {
		t.Fatal(err)
	}
	rev := c.commit("Add a link")
	c.push()
	src := newSource(t, g.URL)
	poll(t, src)
	fsys, err := src.FS(rev)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := fs.ReadDir(fsys, "plans")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(entries, func(e fs.DirEntry) bool { return e.Name() == "link.yaml" })
	if i < 0 || entries[i].Type() != fs.ModeSymlink {
		t.Fatalf("plans/ lists %v; want link.yaml as a symbolic link", entries)
	}
	if _, err := fs.ReadFile(fsys, "plans/link.yaml"); err == nil || !strings.Contains(err.Error(), "not followed") {
		t.Fatalf("read of the link: %v; want it refused", err)
	}
	// The planner reports the link as a problem of that file and loads the
	// others.
	files, err := planfile.LoadFS(fsys, "plans")
	examples, _ := filepath.Glob(filepath.Join("..", "..", "plans", "*.yaml"))
	if err == nil || !strings.Contains(err.Error(), "plans/link.yaml") || len(files) != len(examples) {
		t.Fatalf("load plans: %d files, %v; want the %d example plans and an error naming plans/link.yaml", len(files), err, len(examples))
	}
}

// TestFSStatReadsNoContent: a file's size comes from its object's header.
// go-git inflates a loose object whole when asked for the object; here
// the file is a loose object of 3 MiB in the cache, and Stat, ReadDir's
// Info and planfile.LoadFS, which refuses it by that size, allocate a
// fraction of it.
func TestFSStatReadsNoContent(t *testing.T) {
	g := testenv.StartGit(t, seedPlans(t))
	dir := t.TempDir()
	src, err := gitsource.New(gitsource.Config{URL: g.URL, CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	poll(t, src)

	const size = 3 << 20
	repo, err := gitsource.OpenBare(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	store := func(typ plumbing.ObjectType, data []byte) plumbing.Hash {
		t.Helper()
		obj := repo.Storer.NewEncodedObject()
		obj.SetType(typ)
		w, err := obj.Writer()
		if err == nil {
			_, err = w.Write(data)
		}
		if err == nil {
			err = w.Close()
		}
		h, serr := repo.Storer.SetEncodedObject(obj)
		if err := errors.Join(err, serr); err != nil {
			t.Fatal(err)
		}
		return h
	}
	tree := func(name string, mode filemode.FileMode, h plumbing.Hash) plumbing.Hash {
		t.Helper()
		obj := repo.Storer.NewEncodedObject()
		if err := (&object.Tree{Entries: []object.TreeEntry{{Name: name, Mode: mode, Hash: h}}}).Encode(obj); err != nil {
			t.Fatal(err)
		}
		h, err := repo.Storer.SetEncodedObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	blob := store(plumbing.BlobObject, []byte("# "+strings.Repeat("x", size-3)+"\n"))
	root := tree("plans", filemode.Dir, tree("huge.yaml", filemode.Regular, blob))
	sig := object.Signature{Name: "Dev", Email: "dev@ferry.invalid", When: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)}
	commit := repo.Storer.NewEncodedObject()
	if err := (&object.Commit{Author: sig, Committer: sig, Message: "Add a huge file\n", TreeHash: root}).Encode(commit); err != nil {
		t.Fatal(err)
	}
	rev, err := repo.Storer.SetEncodedObject(commit)
	if err != nil {
		t.Fatal(err)
	}

	fsys, err := src.FS(gitsource.Revision(rev.String()))
	if err != nil {
		t.Fatal(err)
	}
	alloc := leastAllocated(3, func() {
		if info, err := fs.Stat(fsys, "plans/huge.yaml"); err != nil || info.Size() != size {
			t.Errorf("stat plans/huge.yaml = %v, %v; want %d bytes", info, err, size)
		}
		entries, err := fs.ReadDir(fsys, "plans")
		if err != nil || len(entries) != 1 {
			t.Fatalf("read dir plans: %v, %v", entries, err)
		}
		if info, err := entries[0].Info(); err != nil || info.Size() != size {
			t.Errorf("info of plans/huge.yaml = %v, %v; want %d bytes", info, err, size)
		}
		if _, err := planfile.LoadFS(fsys, "plans"); err == nil || !strings.Contains(err.Error(), "plans/huge.yaml: file is 3145728 bytes") {
			t.Errorf("load plans: %v; want plans/huge.yaml refused by its size", err)
		}
	})
	if alloc > size/2 { // reading the file would allocate all of it
		t.Errorf("stat, read dir and load allocated %d bytes for a %d-byte file they do not read", alloc, size)
	}
}
