package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/storage"
)

// Push retries: a rejected push (someone pushed to the branch since the
// fetch) is rebased and pushed again, at most pushAttempts times, waiting
// retryBase, then twice as long each time up to retryMax. A person's push
// takes a moment, so a short wait usually finds the branch quiet; a busy
// branch gets the next reconcile cycle rather than a blocked loop.
const pushAttempts = 5

var (
	retryBase = 200 * time.Millisecond
	retryMax  = 3 * time.Second
)

// Branch is one branch of a Git repository that ferry reads and writes
// with go-git: it commits files to the branch and reads them back (ferry's
// write-back of plan statuses). It keeps a bare clone of that branch alone
// in CacheDir between calls and fetches only when the remote branch moved.
// A Branch is safe for concurrent use; two Branches, or two processes,
// must not share a CacheDir.
type Branch struct {
	// URL is the repository's URL (http(s), ssh or file). It is named in
	// errors with its user information redacted and is not written to the
	// cache; credentials in an http(s) URL are used for basic auth when
	// Auth is nil.
	URL string
	// Auth authenticates fetches and pushes: the same settings, and the
	// same files read at each exchange, as the Git source's, so that an
	// ssh remote is pushed to with the key and known_hosts it is read with.
	// The zero value is none (credentials in an http(s) URL still work).
	Auth Auth
	// Name is the branch's name ("ferry/status"); it must be set. It may
	// be the tracked branch, when pushes to it are allowed. It is created
	// as an orphan branch when it does not exist.
	Name string
	// CacheDir keeps the bare clone between calls and restarts; empty
	// keeps it in memory for the Branch's lifetime.
	CacheDir string
	// AuthorName and AuthorEmail sign the commits; "ferry" and
	// FerryAuthorEmail when empty. Whoever signs, the message carries the
	// StatusTrailer trailer, by which the Source tells ferry's commits from
	// people's.
	AuthorName, AuthorEmail string
	// Timeout bounds each exchange with the remote (the ls-remote and
	// fetch of a sync, a push); DefaultTimeout when zero.
	Timeout time.Duration

	mu    sync.Mutex
	store storage.Storer
	// stored counts the objects written into store since it was opened.
	stored int
	// beforePush, when set (by tests), runs after the commit is built and
	// before it is pushed: the window in which someone else may push.
	beforePush func(attempt int)
	pushes     atomic.Uint64
}

// Pushes counts the pushes Write attempted, rejected ones included.
func (b *Branch) Pushes() uint64 { return b.pushes.Load() }

// File is one file for Write: its path in the tree and its content, made
// only when the commit is built, one file at a time, so that a fleet's
// files are never all in memory at once.
type File struct {
	Path    string
	Content func() ([]byte, error)
}

// Write commits the files whose content differs from the branch head, all
// in one commit, and pushes it; it returns the commit's ID, or "" when
// nothing changed (no commit is made). The commit's subject is
// subject(the changed paths, sorted), its body the trailer
// "Ferry-Status: true" (StatusTrailer). When the push is rejected because
// the branch moved, it fetches the new head, re-applies the same files on
// top of it (the other files of a person's commit survive; in the files
// given, ferry's version wins) and pushes again, with a capped back-off, a
// few times.
func (b *Branch) Write(ctx context.Context, files []File, subject func(changed []string) string) (string, error) {
	seen := map[string]bool{}
	for _, f := range files {
		if err := validPath(f.Path); err != nil {
			return "", fmt.Errorf("write %s: %w", f.Path, err)
		}
		if seen[f.Path] {
			return "", fmt.Errorf("write %s: given twice", f.Path)
		}
		seen[f.Path] = true
	}
	if len(files) == 0 {
		return "", nil
	}
	if b.Name == "" {
		return "", errors.New("write to " + b.where() + ": no branch given")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.open(); err != nil {
		return "", err
	}
	for attempt := 1; ; attempt++ {
		commit, err := b.attempt(ctx, attempt, files, subject)
		if err == nil {
			return commit, nil
		}
		if !rejected(err) {
			return "", err
		}
		if attempt == pushAttempts {
			return "", fmt.Errorf("push to %s branch %s: rejected %d times, the branch keeps moving: %w",
				b.where(), b.Name, attempt, err)
		}
		wait := min(retryBase<<(attempt-1), retryMax)
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("push to %s branch %s: %w", b.where(), b.Name, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// attempt syncs, commits and pushes once. Callers hold b.mu.
func (b *Branch) attempt(ctx context.Context, n int, files []File, subject func([]string) string) (string, error) {
	head, err := b.sync(ctx)
	if err != nil {
		return "", err
	}
	commit, err := b.commit(head, files, subject)
	if err != nil || commit.IsZero() {
		return "", err
	}
	if b.beforePush != nil {
		b.beforePush(n)
	}
	err = b.push(ctx, commit)
	b.pushes.Add(1)
	if err != nil {
		if rejected(err) {
			return "", err
		}
		return "", fmt.Errorf("push to %s branch %s: %w", b.where(), b.Name, err)
	}
	b.compact()
	return commit.String(), nil
}

// bound limits one exchange with the remote to Timeout.
func (b *Branch) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	timeout := b.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return context.WithTimeout(ctx, timeout)
}

// where is the repository's URL for messages, credentials redacted.
func (b *Branch) where() string { return RedactURL(b.URL) }

// validPath refuses a path that is not a plain relative path in the tree
// (empty, absolute, with "." or ".." elements, or a trailing slash).
func validPath(p string) error {
	if !fs.ValidPath(p) || p == "." {
		return fmt.Errorf("invalid path %q", p)
	}
	return nil
}
