package status

import (
	"fmt"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// The Writer builds its commits from objects, without a worktree: a blob
// per status file, and new trees only along the paths that change.

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
