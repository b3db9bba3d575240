package gitsource

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// FS returns the repository's tree at rev as a read-only file system, read
// from the cache's object store (there is no worktree), so that the
// planner and the executors see exactly that revision however the branch
// moves meanwhile. rev must be a revision Poll returned, or one of its
// ancestors.
//
// Files are read whole when opened: the repository holds plans and
// manifests, not large binaries. A file's size (Stat, ReadDir's Info) is
// read from its object's header, without its content, so that a caller
// can refuse a file too large to read (planfile.LoadFS does) before it is
// held in memory. Every entry has the commit's time as its modification
// time. Symbolic links and submodules are listed but cannot
// be opened: following a link could leave the tree that was reviewed.
func (s *Source) FS(rev Revision) (fs.FS, error) {
	h, err := rev.hash()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.repo.CommitObject(h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return nil, fmt.Errorf("revision %s: %w", rev.Short(), ErrUnknownRevision)
	}
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", rev.Short(), err)
	}
	return &treeFS{src: s, root: c.TreeHash, mtime: c.Committer.When}, nil
}

// treeFS is a Git tree as an fs.FS.
type treeFS struct {
	src   *Source
	root  plumbing.Hash
	mtime time.Time
}

var (
	_ fs.ReadDirFS  = (*treeFS)(nil)
	_ fs.ReadFileFS = (*treeFS)(nil)
	_ fs.StatFS     = (*treeFS)(nil)
)

// errLink and errSubmodule say why an entry cannot be opened.
var (
	errLink      = errors.New("symbolic link; links in the repository are not followed")
	errSubmodule = errors.New("submodule; its contents are not part of this repository")
	errIsDir     = errors.New("is a directory")
	errNotDir    = errors.New("not a directory")
)

// node is one entry of the tree.
type node struct {
	name string // base name; "." for the root
	mode filemode.FileMode
	hash plumbing.Hash
}

func (n node) isDir() bool { return n.mode == filemode.Dir }

func (n node) isFile() bool {
	return n.mode == filemode.Regular || n.mode == filemode.Executable || n.mode == filemode.Deprecated
}

// openErr says why a node that is neither file nor directory cannot be read.
func (n node) openErr() error {
	if n.mode == filemode.Symlink {
		return errLink
	}
	return errSubmodule
}

// lookup finds name in the tree. Callers hold src.mu.
func (t *treeFS) lookup(op, name string) (node, error) {
	if !fs.ValidPath(name) {
		return node{}, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	n, found, err := findNode(t.src, t.root, name)
	if err != nil {
		return node{}, &fs.PathError{Op: op, Path: name, Err: err}
	}
	if !found {
		return node{}, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return n, nil
}

// findNode walks a valid io/fs path down from the tree root. A path
// through a file is not found, like one through nothing. (go-git's
// Tree.FindEntry would instead fail to read the file as a tree.) Callers
// hold s.mu.
func findNode(s *Source, root plumbing.Hash, name string) (node, bool, error) {
	n := node{name: ".", mode: filemode.Dir, hash: root}
	if name == "." {
		return n, true, nil
	}
	for part := range strings.SplitSeq(name, "/") {
		if !n.isDir() {
			return node{}, false, nil
		}
		tree, err := object.GetTree(s.repo.Storer, n.hash)
		if err != nil {
			return node{}, false, err
		}
		i := slices.IndexFunc(tree.Entries, func(e object.TreeEntry) bool { return e.Name == part })
		if i < 0 {
			return node{}, false, nil
		}
		e := tree.Entries[i]
		n = node{name: e.Name, mode: e.Mode, hash: e.Hash}
	}
	return n, true, nil
}

// info describes n. Callers hold src.mu, since a file's size is read from
// its object.
func (t *treeFS) info(n node) (*fileInfo, error) {
	fi := &fileInfo{name: n.name, modTime: t.mtime}
	switch {
	case n.isDir():
		fi.mode = fs.ModeDir | 0o555
	case n.mode == filemode.Executable:
		fi.mode = 0o555
	case n.isFile():
		fi.mode = 0o444
	case n.mode == filemode.Symlink:
		fi.mode = fs.ModeSymlink | 0o777
	default:
		fi.mode = fs.ModeIrregular
	}
	if n.isFile() || n.mode == filemode.Symlink {
		size, err := blobSize(t.src, n.hash)
		if err != nil {
			return nil, err
		}
		fi.size = size
	}
	return fi, nil
}

// objectSizer is the part of go-git's filesystem storage that reads an
// object's size from its header alone (for a delta in a pack, from the
// delta's header), where EncodedObject of a loose object inflates the
// whole content into memory.
type objectSizer interface {
	EncodedObjectSize(h plumbing.Hash) (int64, error)
}

var _ objectSizer = (*filesystem.Storage)(nil)

// blobSize returns the size of a blob without reading its content.
// Callers hold s.mu.
func blobSize(s *Source, h plumbing.Hash) (int64, error) {
	if st, ok := s.repo.Storer.(objectSizer); ok {
		return st.EncodedObjectSize(h)
	}
	obj, err := s.repo.Storer.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return 0, err
	}
	return obj.Size(), nil
}

// entries lists a directory in name order, as io/fs requires (Git orders
// a directory as if its name ended in "/"). Callers hold src.mu.
func (t *treeFS) entries(n node) ([]fs.DirEntry, error) {
	tree, err := object.GetTree(t.src.repo.Storer, n.hash)
	if err != nil {
		return nil, err
	}
	list := make([]fs.DirEntry, 0, len(tree.Entries))
	for _, e := range tree.Entries {
		list = append(list, &dirEntry{fsys: t, node: node{name: e.Name, mode: e.Mode, hash: e.Hash}})
	}
	slices.SortFunc(list, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return list, nil
}

// read returns a file's contents. Callers hold src.mu.
func (t *treeFS) read(n node) ([]byte, error) { return readBlob(t.src, n.hash) }

// readBlob returns a blob's contents. Callers hold s.mu.
func readBlob(s *Source, h plumbing.Hash) ([]byte, error) {
	blob, err := object.GetBlob(s.repo.Storer, h)
	if err != nil {
		return nil, err
	}
	r, err := blob.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// Open opens a file or a directory.
func (t *treeFS) Open(name string) (fs.File, error) {
	t.src.mu.Lock()
	defer t.src.mu.Unlock()
	n, err := t.lookup("open", name)
	if err != nil {
		return nil, err
	}
	fi, err := t.info(n)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	switch {
	case n.isDir():
		list, err := t.entries(n)
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return &dirFile{path: name, info: fi, entries: list}, nil
	case n.isFile():
		b, err := t.read(n)
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return &blobFile{path: name, info: fi, Reader: bytes.NewReader(b)}, nil
	default:
		return nil, &fs.PathError{Op: "open", Path: name, Err: n.openErr()}
	}
}

// ReadFile returns a file's contents.
func (t *treeFS) ReadFile(name string) ([]byte, error) {
	t.src.mu.Lock()
	defer t.src.mu.Unlock()
	n, err := t.lookup("read", name)
	if err != nil {
		return nil, err
	}
	switch {
	case n.isDir():
		return nil, &fs.PathError{Op: "read", Path: name, Err: errIsDir}
	case !n.isFile():
		return nil, &fs.PathError{Op: "read", Path: name, Err: n.openErr()}
	}
	b, err := t.read(n)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	return b, nil
}

// ReadDir lists a directory in name order.
func (t *treeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	t.src.mu.Lock()
	defer t.src.mu.Unlock()
	n, err := t.lookup("readdir", name)
	if err != nil {
		return nil, err
	}
	if !n.isDir() {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errNotDir}
	}
	list, err := t.entries(n)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: err}
	}
	return list, nil
}

// Stat describes a file or directory without reading it.
func (t *treeFS) Stat(name string) (fs.FileInfo, error) {
	t.src.mu.Lock()
	defer t.src.mu.Unlock()
	n, err := t.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	fi, err := t.info(n)
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	return fi, nil
}

// fileInfo is the fs.FileInfo of a tree entry.
type fileInfo struct {
	name    string
	size    int64
	mode    fs.FileMode
	modTime time.Time
}

func (fi *fileInfo) Name() string       { return fi.name }
func (fi *fileInfo) Size() int64        { return fi.size }
func (fi *fileInfo) Mode() fs.FileMode  { return fi.mode }
func (fi *fileInfo) ModTime() time.Time { return fi.modTime }
func (fi *fileInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi *fileInfo) Sys() any           { return nil }

// dirEntry is an fs.DirEntry whose Info reads the size lazily, as
// fs.DirEntry allows.
type dirEntry struct {
	fsys *treeFS
	node node
}

func (d *dirEntry) Name() string { return d.node.name }
func (d *dirEntry) IsDir() bool  { return d.node.isDir() }

func (d *dirEntry) Type() fs.FileMode {
	switch {
	case d.node.isDir():
		return fs.ModeDir
	case d.node.mode == filemode.Symlink:
		return fs.ModeSymlink
	case d.node.isFile():
		return 0
	default:
		return fs.ModeIrregular
	}
}

func (d *dirEntry) Info() (fs.FileInfo, error) {
	d.fsys.src.mu.Lock()
	defer d.fsys.src.mu.Unlock()
	return d.fsys.info(d.node)
}

func (d *dirEntry) String() string { return fs.FormatDirEntry(d) }

// blobFile is an open file, its contents in memory.
type blobFile struct {
	path string
	info *fileInfo
	*bytes.Reader
}

var (
	_ io.Seeker   = (*blobFile)(nil)
	_ io.ReaderAt = (*blobFile)(nil)
)

func (f *blobFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *blobFile) Close() error               { return nil }

// dirFile is an open directory.
type dirFile struct {
	path    string
	info    *fileInfo
	entries []fs.DirEntry
	offset  int
}

var _ fs.ReadDirFile = (*dirFile)(nil)

func (d *dirFile) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *dirFile) Close() error               { return nil }

func (d *dirFile) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.path, Err: errIsDir}
}

// ReadDir follows fs.ReadDirFile: n > 0 returns at most n entries and
// io.EOF at the end; n <= 0 returns the rest.
func (d *dirFile) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.entries[d.offset:]
	if n <= 0 {
		d.offset = len(d.entries)
		return slices.Clone(rest), nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(rest))
	d.offset += n
	return slices.Clone(rest[:n]), nil
}
