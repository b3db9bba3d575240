// The bare clone a Branch keeps of its branch: opened or created on first use,
// dropped once it has grown, since go-git never packs what it writes.

package gitsource

import (
	"fmt"
	"io"
	"os"

	"github.com/go-git/go-git/v5/storage/memory"
)

// compactAfter is how many objects the Branch stores (a blob per changed
// status file, trees, the commit) before it drops its cache once a push
// succeeded, to fetch the branch's head afresh at the next call. go-git
// never packs the loose objects it writes: one 1,000-plan migration left
// 77 MB in 18,567 files. The fetch is shallow: one commit and its tree.
var compactAfter = 20000

// compact drops the cache when it holds compactAfter objects written
// since it was opened: the remote has them all, and the next call fetches
// the branch afresh. Callers hold b.mu.
func (b *Branch) compact() {
	if b.stored < compactAfter {
		return
	}
	if b.CacheDir != "" {
		if err := os.RemoveAll(b.CacheDir); err != nil {
			return // the cache stays as it is; the next push tries again
		}
	}
	if c, ok := b.store.(io.Closer); ok {
		_ = c.Close()
	}
	b.store, b.stored = nil, 0
}

// open opens or creates the cache.
func (b *Branch) open() error {
	if b.store != nil {
		return nil
	}
	if b.CacheDir == "" {
		b.store = memory.NewStorage()
		return nil
	}
	if err := os.MkdirAll(b.CacheDir, 0o755); err != nil {
		return fmt.Errorf("open write cache %s: %w", b.CacheDir, err)
	}
	repo, err := OpenBare(b.CacheDir, true)
	if err != nil {
		return fmt.Errorf("open write cache %s: %w", b.CacheDir, err)
	}
	// Pushes send small YAML files whole: looking for deltas against
	// their previous versions cost more CPU than the bytes saved.
	cfg, err := repo.Config()
	if err != nil {
		return fmt.Errorf("open write cache %s: %w", b.CacheDir, err)
	}
	if cfg.Pack.Window != 0 {
		cfg.Pack.Window = 0
		if err := repo.SetConfig(cfg); err != nil {
			return fmt.Errorf("open write cache %s: %w", b.CacheDir, err)
		}
	}
	b.store = repo.Storer
	return nil
}
