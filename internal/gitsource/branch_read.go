// Reading a Branch back: one file, or every file of a directory,
// at the remote branch's head.

package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/go-git/go-git/v5/plumbing/object"
)

// ReadFile returns a file's content at the head of the branch; the error
// wraps fs.ErrNotExist when the file or the branch does not exist.
func (b *Branch) ReadFile(ctx context.Context, name string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	tree, err := b.headTree(ctx)
	if err != nil {
		return nil, err
	}
	if tree == nil {
		return nil, fmt.Errorf("read %s: branch %s of %s does not exist: %w", name, b.Name, b.where(), fs.ErrNotExist)
	}
	f, err := tree.File(name)
	if errors.Is(err, object.ErrFileNotFound) {
		return nil, fmt.Errorf("read %s: not on branch %s of %s: %w", name, b.Name, b.where(), fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return contents(f)
}

// ReadDir calls fn with the name and content of each file directly in dir
// at the head of the branch, in name order; nothing when the branch or the
// directory does not exist. It stops at fn's first error.
func (b *Branch) ReadDir(ctx context.Context, dir string, fn func(name string, data []byte) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	tree, err := b.headTree(ctx)
	if err != nil || tree == nil {
		return err
	}
	sub, err := tree.Tree(dir)
	if errors.Is(err, object.ErrDirectoryNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	for _, e := range sub.Entries {
		if !e.Mode.IsFile() {
			continue
		}
		f, err := sub.TreeEntryFile(&e)
		if err != nil {
			return fmt.Errorf("read %s/%s: %w", dir, e.Name, err)
		}
		data, err := contents(f)
		if err != nil {
			return err
		}
		if err := fn(e.Name, data); err != nil {
			return err
		}
	}
	return nil
}

func contents(f *object.File) ([]byte, error) {
	r, err := f.Reader()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name, err)
	}
	return data, nil
}

// headTree returns the tree of the branch's head, or nil when the
// branch does not exist.
func (b *Branch) headTree(ctx context.Context) (*object.Tree, error) {
	if err := b.open(); err != nil {
		return nil, err
	}
	head, err := b.sync(ctx)
	if err != nil || head.IsZero() {
		return nil, err
	}
	c, err := object.GetCommit(b.store, head)
	if err != nil {
		return nil, fmt.Errorf("read commit %s of branch %s: %w", head, b.Name, err)
	}
	t, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("read commit %s of branch %s: %w", head, b.Name, err)
	}
	return t, nil
}
