package gitsource

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// A Branch builds its commits from objects, without a worktree: a blob
// per file, and new trees only along the paths that change.

func storeBlob(s storer.EncodedObjectStorer, data []byte) error {
	obj := s.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	obj.SetSize(int64(len(data)))
	wr, err := obj.Writer()
	if err != nil {
		return err
	}
	if _, err := wr.Write(data); err != nil {
		return err
	}
	if err := wr.Close(); err != nil {
		return err
	}
	_, err = s.SetEncodedObject(obj)
	return err
}

// treeDirs finds entries of a tree by path, decoding each directory once:
// go-git's Tree.FindEntry decodes the directory again for every path one
// level down (its cache starts at two), and status/ holds a fleet's files.
type treeDirs struct {
	root *object.Tree // nil: an empty tree
	dirs map[string]*object.Tree
}

// find returns the entry at p, or nil when there is none.
func (d *treeDirs) find(p string) *object.TreeEntry {
	if d.root == nil {
		return nil
	}
	dir, name := path.Split(p)
	t := d.root
	if dir != "" {
		var ok bool
		if t, ok = d.dirs[dir]; !ok {
			t, _ = d.root.Tree(strings.TrimSuffix(dir, "/")) // nil when not a directory
			if d.dirs == nil {
				d.dirs = map[string]*object.Tree{}
			}
			d.dirs[dir] = t
		}
		if t == nil {
			return nil
		}
	}
	e, err := t.FindEntry(name)
	if err != nil {
		return nil
	}
	return e
}

// writeTree stores base (nil: an empty tree) with files put in at their
// paths (relative to base, as blob IDs already stored), and returns the new
// tree's ID. Entries other than those paths are kept as they are.
func writeTree(s storer.EncodedObjectStorer, base *object.Tree, files map[string]plumbing.Hash) (plumbing.Hash, error) {
	entries := map[string]object.TreeEntry{}
	if base != nil {
		for _, e := range base.Entries {
			entries[e.Name] = e
		}
	}
	subdirs := map[string]map[string]plumbing.Hash{}
	for p, h := range files {
		dir, rest, nested := strings.Cut(p, "/")
		if !nested {
			entries[p] = object.TreeEntry{Name: p, Mode: filemode.Regular, Hash: h}
			continue
		}
		if subdirs[dir] == nil {
			subdirs[dir] = map[string]plumbing.Hash{}
		}
		subdirs[dir][rest] = h
	}
	for dir, sub := range subdirs {
		var subBase *object.Tree
		if e, ok := entries[dir]; ok {
			if e.Mode != filemode.Dir {
				return plumbing.ZeroHash, fmt.Errorf("%s is a file, not a directory", dir)
			}
			t, err := object.GetTree(s, e.Hash)
			if err != nil {
				return plumbing.ZeroHash, fmt.Errorf("read tree %s: %w", dir, err)
			}
			subBase = t
		}
		h, err := writeTree(s, subBase, sub)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries[dir] = object.TreeEntry{Name: dir, Mode: filemode.Dir, Hash: h}
	}
	tree := &object.Tree{}
	for _, e := range entries {
		tree.Entries = append(tree.Entries, e)
	}
	// Git orders entries by name, a directory's name read as ending in "/".
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(tree.Entries, func(i, j int) bool { return key(tree.Entries[i]) < key(tree.Entries[j]) })
	obj := s.NewEncodedObject()
	if err := tree.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return s.SetEncodedObject(obj)
}

// commit stores a commit on head (none: an orphan) that puts the files
// whose content differs from head's, and returns its ID; the zero hash
// when every file is as head has it. Each file is made and stored in turn.
func (b *Branch) commit(head plumbing.Hash, files []File, subject func([]string) string) (plumbing.Hash, error) {
	base, err := b.tree(head)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	changed, err := b.storeChanged(base, files)
	if err != nil || len(changed) == 0 {
		return plumbing.ZeroHash, err
	}
	root, err := writeTree(b.store, base, changed)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("build commit on branch %s: %w", b.Name, err)
	}
	sig := object.Signature{Name: b.AuthorName, Email: b.AuthorEmail, When: time.Now()}
	if sig.Name == "" {
		sig.Name = "ferry"
	}
	if sig.Email == "" {
		sig.Email = FerryAuthorEmail
	}
	c := &object.Commit{
		Author:    sig,
		Committer: sig,
		Message:   subject(slices.Sorted(maps.Keys(changed))) + "\n\n" + StatusTrailer + ": true\n",
		TreeHash:  root,
	}
	if !head.IsZero() {
		c.ParentHashes = []plumbing.Hash{head}
	}
	obj := b.store.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("build commit on branch %s: %w", b.Name, err)
	}
	id, err := b.store.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store commit on branch %s: %w", b.Name, err)
	}
	b.stored += 1 + treesAlong(changed)
	return id, nil
}

// treesAlong counts the trees a commit of paths writes anew: the root and
// every directory on the way to each path.
func treesAlong(paths map[string]plumbing.Hash) int {
	dirs := map[string]bool{"": true}
	for p := range paths {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	return len(dirs)
}

// tree is head's tree; nil for the zero hash (a new branch).
func (b *Branch) tree(head plumbing.Hash) (*object.Tree, error) {
	if head.IsZero() {
		return nil, nil
	}
	c, err := object.GetCommit(b.store, head)
	if err != nil {
		return nil, fmt.Errorf("read head %s of branch %s: %w", head, b.Name, err)
	}
	t, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("read head %s of branch %s: %w", head, b.Name, err)
	}
	return t, nil
}

// storeChanged stores the blobs of the files whose content differs from
// base's, and returns their IDs by path.
func (b *Branch) storeChanged(base *object.Tree, files []File) (map[string]plumbing.Hash, error) {
	changed := map[string]plumbing.Hash{}
	dirs := treeDirs{root: base}
	for _, f := range files {
		data, err := f.Content()
		if err != nil {
			return nil, err
		}
		h := plumbing.ComputeHash(plumbing.BlobObject, data)
		if e := dirs.find(f.Path); e != nil && e.Hash == h && e.Mode.IsFile() {
			continue
		}
		if err := storeBlob(b.store, data); err != nil {
			return nil, fmt.Errorf("store %s: %w", f.Path, err)
		}
		b.stored++
		changed[f.Path] = h
	}
	return changed, nil
}
