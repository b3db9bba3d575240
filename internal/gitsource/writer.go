package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/memory"
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

// compactAfter is how many objects the Writer stores (a blob per changed
// status file, trees, the commit) before it drops its cache once a push
// succeeded, to fetch the branch's head afresh at the next call. go-git
// never packs the loose objects it writes: one 1,000-plan migration left
// 77 MB in 18,567 files. The fetch is shallow: one commit and its tree.
var compactAfter = 20000

// Writer commits files to one branch of a Git repository with go-git, and
// reads them back: ferry's write-back of plan statuses. It keeps a bare
// clone of that branch alone in CacheDir between calls and fetches only
// when the remote branch moved. A Writer is safe for concurrent use; two
// Writers, or two processes, must not share a CacheDir.
type Writer struct {
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
	// Branch receives the commits; it must be set. It may be the tracked
	// branch, when pushes to it are allowed. It is created as an orphan
	// branch when it does not exist.
	Branch string
	// CacheDir keeps the bare clone between calls and restarts; empty
	// keeps it in memory for the Writer's lifetime.
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
func (w *Writer) Pushes() uint64 { return w.pushes.Load() }

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
func (w *Writer) Write(ctx context.Context, files []File, subject func(changed []string) string) (string, error) {
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
	if w.Branch == "" {
		return "", errors.New("write to " + w.where() + ": no branch given")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.open(); err != nil {
		return "", err
	}
	for attempt := 1; ; attempt++ {
		commit, err := w.attempt(ctx, attempt, files, subject)
		if err == nil {
			return commit, nil
		}
		if !rejected(err) {
			return "", err
		}
		if attempt == pushAttempts {
			return "", fmt.Errorf("push to %s branch %s: rejected %d times, the branch keeps moving: %w",
				w.where(), w.Branch, attempt, err)
		}
		wait := min(retryBase<<(attempt-1), retryMax)
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("push to %s branch %s: %w", w.where(), w.Branch, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// attempt syncs, commits and pushes once. Callers hold w.mu.
func (w *Writer) attempt(ctx context.Context, n int, files []File, subject func([]string) string) (string, error) {
	head, err := w.sync(ctx)
	if err != nil {
		return "", err
	}
	commit, err := w.commit(head, files, subject)
	if err != nil || commit.IsZero() {
		return "", err
	}
	if w.beforePush != nil {
		w.beforePush(n)
	}
	err = w.push(ctx, commit)
	w.pushes.Add(1)
	if err != nil {
		if rejected(err) {
			return "", err
		}
		return "", fmt.Errorf("push to %s branch %s: %w", w.where(), w.Branch, err)
	}
	w.compact()
	return commit.String(), nil
}

// ReadFile returns a file's content at the head of the branch; the error
// wraps fs.ErrNotExist when the file or the branch does not exist.
func (w *Writer) ReadFile(ctx context.Context, name string) ([]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	tree, err := w.headTree(ctx)
	if err != nil {
		return nil, err
	}
	if tree == nil {
		return nil, fmt.Errorf("read %s: branch %s of %s does not exist: %w", name, w.Branch, w.where(), fs.ErrNotExist)
	}
	f, err := tree.File(name)
	if errors.Is(err, object.ErrFileNotFound) {
		return nil, fmt.Errorf("read %s: not on branch %s of %s: %w", name, w.Branch, w.where(), fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return contents(f)
}

// ReadDir calls fn with the name and content of each file directly in dir
// at the head of the branch, in name order; nothing when the branch or the
// directory does not exist. It stops at fn's first error.
func (w *Writer) ReadDir(ctx context.Context, dir string, fn func(name string, data []byte) error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	tree, err := w.headTree(ctx)
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

// headTree returns the tree of the status branch's head, or nil when the
// branch does not exist.
func (w *Writer) headTree(ctx context.Context) (*object.Tree, error) {
	if err := w.open(); err != nil {
		return nil, err
	}
	head, err := w.sync(ctx)
	if err != nil || head.IsZero() {
		return nil, err
	}
	c, err := object.GetCommit(w.store, head)
	if err != nil {
		return nil, fmt.Errorf("read commit %s of branch %s: %w", head, w.Branch, err)
	}
	t, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("read commit %s of branch %s: %w", head, w.Branch, err)
	}
	return t, nil
}

// compact drops the cache when it holds compactAfter objects written
// since it was opened: the remote has them all, and the next call fetches
// the branch afresh. Callers hold w.mu.
func (w *Writer) compact() {
	if w.stored < compactAfter {
		return
	}
	if w.CacheDir != "" {
		if err := os.RemoveAll(w.CacheDir); err != nil {
			return // the cache stays as it is; the next push tries again
		}
	}
	if c, ok := w.store.(io.Closer); ok {
		_ = c.Close()
	}
	w.store, w.stored = nil, 0
}

// open opens or creates the cache.
func (w *Writer) open() error {
	if w.store != nil {
		return nil
	}
	if w.CacheDir == "" {
		w.store = memory.NewStorage()
		return nil
	}
	if err := os.MkdirAll(w.CacheDir, 0o755); err != nil {
		return fmt.Errorf("open write cache %s: %w", w.CacheDir, err)
	}
	repo, err := OpenBare(w.CacheDir, true)
	if err != nil {
		return fmt.Errorf("open write cache %s: %w", w.CacheDir, err)
	}
	// Pushes send small YAML files whole: looking for deltas against
	// their previous versions cost more CPU than the bytes saved.
	cfg, err := repo.Config()
	if err != nil {
		return fmt.Errorf("open write cache %s: %w", w.CacheDir, err)
	}
	if cfg.Pack.Window != 0 {
		cfg.Pack.Window = 0
		if err := repo.SetConfig(cfg); err != nil {
			return fmt.Errorf("open write cache %s: %w", w.CacheDir, err)
		}
	}
	w.store = repo.Storer
	return nil
}

// tracking is the cache's copy of the remote branch.
func (w *Writer) tracking() plumbing.ReferenceName {
	return plumbing.NewRemoteReferenceName("origin", w.Branch)
}

// outgoing holds the commit being pushed.
const outgoing = plumbing.ReferenceName("refs/ferry/outgoing")

// remote is the branch's remote, with its auth method and the
// function that keeps the auth's secrets out of errors. The remote lives in
// the cache's storage, so that the URL is never written to disk.
func (w *Writer) remote() (*git.Remote, transport.AuthMethod, func(error) error, error) {
	url, auth, scrubErr, err := Remote(w.URL, w.Auth)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("repository to write to: %w", err)
	}
	return git.NewRemote(w.store, &config.RemoteConfig{
		Name:  "origin",
		URLs:  []string{url},
		Fetch: []config.RefSpec{w.fetchSpec()},
	}), auth, scrubErr, nil
}

func (w *Writer) fetchSpec() config.RefSpec {
	return config.RefSpec("+" + plumbing.NewBranchReferenceName(w.Branch).String() + ":" + w.tracking().String())
}

// sync makes the cache hold the remote branch's head and returns it; the
// zero hash when the branch does not exist. Like Flux's source-controller,
// it asks for the remote's references first and fetches only when the
// head moved.
func (w *Writer) sync(ctx context.Context) (plumbing.Hash, error) {
	ctx, cancel := w.bound(ctx)
	defer cancel()
	rem, auth, scrubErr, err := w.remote()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	refs, err := rem.ListContext(ctx, &git.ListOptions{Auth: auth})
	err = scrubErr(err)
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("list references of %s: %w", w.where(), err)
	}
	var remoteHead plumbing.Hash
	for _, r := range refs {
		if r.Name() == plumbing.NewBranchReferenceName(w.Branch) {
			remoteHead = r.Hash()
		}
	}
	if remoteHead.IsZero() {
		return plumbing.ZeroHash, nil
	}
	if local, err := w.store.Reference(w.tracking()); err == nil && local.Hash() == remoteHead {
		if _, err := object.GetCommit(w.store, remoteHead); err == nil {
			return remoteHead, nil
		}
	}
	// Only the head commit and its tree: a commit needs its parent and
	// the parent's tree, never the branch's history, which grows with
	// every status commit. Pushes send what the remote's head lacks.
	err = rem.FetchContext(ctx, &git.FetchOptions{
		RemoteName: "origin",
		RefSpecs:   []config.RefSpec{w.fetchSpec()},
		Auth:       auth,
		Tags:       git.NoTags,
		Force:      true,
		Depth:      1,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return plumbing.ZeroHash, fmt.Errorf("fetch branch %s of %s: %w", w.Branch, w.where(), scrubErr(err))
	}
	// The branch may have moved again between the listing and the fetch:
	// what was fetched is the newer head.
	ref, err := w.store.Reference(w.tracking())
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("fetch branch %s of %s: %w", w.Branch, w.where(), err)
	}
	return ref.Hash(), nil
}

// commit stores a commit on head (none: an orphan) that puts the files
// whose content differs from head's, and returns its ID; the zero hash
// when every file is as head has it. Each file is made and stored in turn.
func (w *Writer) commit(head plumbing.Hash, files []File, subject func([]string) string) (plumbing.Hash, error) {
	base, err := w.tree(head)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	changed, err := w.storeChanged(base, files)
	if err != nil || len(changed) == 0 {
		return plumbing.ZeroHash, err
	}
	root, err := writeTree(w.store, base, changed)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("build commit on branch %s: %w", w.Branch, err)
	}
	sig := object.Signature{Name: w.AuthorName, Email: w.AuthorEmail, When: time.Now()}
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
	obj := w.store.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("build commit on branch %s: %w", w.Branch, err)
	}
	id, err := w.store.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store commit on branch %s: %w", w.Branch, err)
	}
	w.stored += 1 + treesAlong(changed)
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
func (w *Writer) tree(head plumbing.Hash) (*object.Tree, error) {
	if head.IsZero() {
		return nil, nil
	}
	c, err := object.GetCommit(w.store, head)
	if err != nil {
		return nil, fmt.Errorf("read head %s of branch %s: %w", head, w.Branch, err)
	}
	t, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("read head %s of branch %s: %w", head, w.Branch, err)
	}
	return t, nil
}

// storeChanged stores the blobs of the files whose content differs from
// base's, and returns their IDs by path.
func (w *Writer) storeChanged(base *object.Tree, files []File) (map[string]plumbing.Hash, error) {
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
		if err := storeBlob(w.store, data); err != nil {
			return nil, fmt.Errorf("store %s: %w", f.Path, err)
		}
		w.stored++
		changed[f.Path] = h
	}
	return changed, nil
}

// push sends commit to the branch without force: the server (or go-git,
// seeing the advertised head) rejects it when the branch moved since the
// fetch.
func (w *Writer) push(ctx context.Context, commit plumbing.Hash) error {
	ctx, cancel := w.bound(ctx)
	defer cancel()
	if err := w.store.SetReference(plumbing.NewHashReference(outgoing, commit)); err != nil {
		return fmt.Errorf("set %s: %w", outgoing, err)
	}
	rem, auth, scrubErr, err := w.remote()
	if err != nil {
		return err
	}
	err = rem.PushContext(ctx, &git.PushOptions{
		RemoteName: "origin",
		RefSpecs:   []config.RefSpec{config.RefSpec(outgoing.String() + ":" + plumbing.NewBranchReferenceName(w.Branch).String())},
		Auth:       auth,
	})
	if err != nil {
		return scrubErr(err)
	}
	return w.store.SetReference(plumbing.NewHashReference(w.tracking(), commit))
}

// rejected reports whether a push failed because the branch moved. go-git
// reports its own check ("non-fast-forward update") and the server's
// refusals as plain errors, so the text is all there is to go on.
func rejected(err error) bool {
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"non-fast-forward", "fetch first", "failed to update ref", "cannot lock ref", "failed to lock", "stale info"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// bound limits one exchange with the remote to Timeout.
func (w *Writer) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	timeout := w.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return context.WithTimeout(ctx, timeout)
}

// where is the repository's URL for messages, credentials redacted.
func (w *Writer) where() string { return RedactURL(w.URL) }

// validPath refuses a path that is not a plain relative path in the tree
// (empty, absolute, with "." or ".." elements, or a trailing slash).
func validPath(p string) error {
	if !fs.ValidPath(p) || p == "." {
		return fmt.Errorf("invalid path %q", p)
	}
	return nil
}
