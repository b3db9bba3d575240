// The local bare repository that fetches go into, kept across restarts.

package gitsource

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// ObjectCacheSize is how much of a repository's objects go-git keeps
// decoded in memory (its default is 96 MiB per repository). ferry reads a
// few trees per revision and walks a file's history now and then.
const ObjectCacheSize = 8 * cache.MiByte

// OpenBare opens the bare repository in dir with ObjectCacheSize; create
// initialises it when it does not exist.
func OpenBare(dir string, create bool) (*git.Repository, error) {
	st := filesystem.NewStorage(osfs.New(dir), cache.NewObjectLRU(ObjectCacheSize))
	repo, err := git.Open(st, nil)
	if errors.Is(err, git.ErrRepositoryNotExists) && create {
		return git.Init(st, nil)
	}
	return repo, err
}

// openCache opens the bare repository in dir, or creates it when dir is
// missing or empty.
func openCache(dir string) (*git.Repository, error) {
	repo, err := OpenBare(dir, false)
	if err == nil {
		return repo, nil
	}
	if !errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, fmt.Errorf("open git cache %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open git cache %s: %w", dir, err)
	}
	if len(entries) > 0 {
		return nil, fmt.Errorf("open git cache %s: the directory holds files but no git repository; give an empty or new directory", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create git cache %s: %w", dir, err)
	}
	repo, err = OpenBare(dir, true)
	if err != nil {
		return nil, fmt.Errorf("create git cache %s: %w", dir, err)
	}
	return repo, nil
}

// hasCommit reports whether the cache holds the commit. Callers hold s.mu.
func (s *Source) hasCommit(rev Revision) (bool, error) {
	h, err := rev.hash()
	if err != nil {
		return false, err
	}
	_, err = s.repo.CommitObject(h)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, plumbing.ErrObjectNotFound):
		return false, nil
	default:
		return false, fmt.Errorf("look up %s in the cache: %w", rev.Short(), err)
	}
}
