package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
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

	"github.com/ferry-dev/ferry/internal/gitsource"
)

// DefaultBranch is the branch statuses go to when Writer.Branch is empty:
// a branch of its own, so that a protected main branch still works and
// status commits do not crowd the plans' history.
const DefaultBranch = "ferry/status"

// Dir is the directory of the status files on the status branch:
// Dir/<plan>.yaml.
const Dir = "status"

// ErrNoStatus is returned by Read for a plan without a status file, or
// when the status branch does not exist yet.
var ErrNoStatus = errors.New("no status yet")

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

// Writer writes plans' statuses to status/<plan>.yaml on a branch of a Git
// repository with go-git, and reads them back. It keeps a bare clone of
// that branch alone in CacheDir between calls and fetches only when the
// remote branch moved. A Writer is safe for concurrent use; two Writers,
// or two processes, must not share a CacheDir.
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
	Auth gitsource.Auth
	// Branch receives the status commits; DefaultBranch when empty. It may
	// be the tracked branch, when pushes to it are allowed. It is created
	// as an orphan branch when it does not exist.
	Branch string
	// CacheDir keeps the bare clone between calls and restarts; empty
	// keeps it in memory for the Writer's lifetime.
	CacheDir string
	// AuthorName and AuthorEmail sign the commits; "ferry" and
	// gitsource.FerryAuthorEmail when empty. Whoever signs, the message
	// carries the gitsource.StatusTrailer trailer, by which the Git source
	// tells ferry's commits from people's.
	AuthorName, AuthorEmail string
	// Timeout bounds each exchange with the remote (the ls-remote and
	// fetch of a sync, a push); gitsource.DefaultTimeout when zero.
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

// Write commits the status files of the plans whose status differs from
// the branch head, all in one commit with the trailer "Ferry-Status: true"
// (gitsource.StatusTrailer),
// and pushes it; it returns the commit's ID, or "" when nothing changed
// (no commit is made). When the push is rejected because the branch moved,
// it fetches the new head, re-applies the same files on top of it (the
// other files of a person's commit survive; in status files ferry's
// version wins) and pushes again, with a capped back-off, a few times.
func (w *Writer) Write(ctx context.Context, statuses []*PlanStatus) (string, error) {
	files := map[string]*PlanStatus{}
	for _, st := range statuses {
		if st == nil {
			continue
		}
		p, err := statusPath(st.Plan)
		if err != nil {
			return "", fmt.Errorf("write status: %w", err)
		}
		if _, dup := files[p]; dup {
			return "", fmt.Errorf("write status: plan %s given twice", st.Plan)
		}
		files[p] = st
	}
	if len(files) == 0 {
		return "", nil
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.open(); err != nil {
		return "", err
	}
	for attempt := 1; ; attempt++ {
		head, err := w.sync(ctx)
		if err != nil {
			return "", err
		}
		commit, err := w.commit(head, files)
		if err != nil || commit.IsZero() {
			return "", err
		}
		if w.beforePush != nil {
			w.beforePush(attempt)
		}
		err = w.push(ctx, commit)
		w.pushes.Add(1)
		if err == nil {
			w.compact()
			return commit.String(), nil
		}
		if !rejected(err) {
			return "", fmt.Errorf("push status to %s branch %s: %w", w.where(), w.branch(), err)
		}
		if attempt == pushAttempts {
			return "", fmt.Errorf("push status to %s branch %s: rejected %d times, the branch keeps moving: %w",
				w.where(), w.branch(), attempt, err)
		}
		wait := min(retryBase<<(attempt-1), retryMax)
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("push status to %s branch %s: %w", w.where(), w.branch(), ctx.Err())
		case <-time.After(wait):
		}
	}
}

// Read returns a plan's status from the head of the status branch, or an
// error wrapping ErrNoStatus when it has none.
func (w *Writer) Read(ctx context.Context, plan string) (*PlanStatus, error) {
	p, err := statusPath(plan)
	if err != nil {
		return nil, fmt.Errorf("read status: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	tree, err := w.headTree(ctx)
	if err != nil {
		return nil, err
	}
	if tree == nil {
		return nil, fmt.Errorf("read status of %s: branch %s of %s does not exist: %w", plan, w.branch(), w.where(), ErrNoStatus)
	}
	f, err := tree.File(p)
	if errors.Is(err, object.ErrFileNotFound) {
		return nil, fmt.Errorf("read status of %s: no %s on branch %s of %s: %w", plan, p, w.branch(), w.where(), ErrNoStatus)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	return decodeFile(f)
}

// ReadAll returns every plan's status from the head of the status branch,
// ordered by plan name; none when the branch does not exist yet.
func (w *Writer) ReadAll(ctx context.Context) ([]*PlanStatus, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	tree, err := w.headTree(ctx)
	if err != nil || tree == nil {
		return nil, err
	}
	dir, err := tree.Tree(Dir)
	if errors.Is(err, object.ErrDirectoryNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", Dir, err)
	}
	var out []*PlanStatus
	for _, e := range dir.Entries {
		if !e.Mode.IsFile() || !strings.HasSuffix(e.Name, ".yaml") {
			continue
		}
		f, err := dir.TreeEntryFile(&e)
		if err != nil {
			return nil, fmt.Errorf("read %s/%s: %w", Dir, e.Name, err)
		}
		st, err := decodeFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b *PlanStatus) int { return strings.Compare(a.Plan, b.Plan) })
	return out, nil
}

func decodeFile(f *object.File) (*PlanStatus, error) {
	data, err := f.Contents()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name, err)
	}
	st, err := Decode([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name, err)
	}
	return st, nil
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
		return nil, fmt.Errorf("read commit %s of branch %s: %w", head, w.branch(), err)
	}
	t, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("read commit %s of branch %s: %w", head, w.branch(), err)
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
		return fmt.Errorf("open status cache %s: %w", w.CacheDir, err)
	}
	repo, err := gitsource.OpenBare(w.CacheDir, true)
	if err != nil {
		return fmt.Errorf("open status cache %s: %w", w.CacheDir, err)
	}
	// Pushes send small YAML files whole: looking for deltas against
	// their previous versions cost more CPU than the bytes saved.
	cfg, err := repo.Config()
	if err != nil {
		return fmt.Errorf("open status cache %s: %w", w.CacheDir, err)
	}
	if cfg.Pack.Window != 0 {
		cfg.Pack.Window = 0
		if err := repo.SetConfig(cfg); err != nil {
			return fmt.Errorf("open status cache %s: %w", w.CacheDir, err)
		}
	}
	w.store = repo.Storer
	return nil
}

func (w *Writer) branch() string {
	if w.Branch == "" {
		return DefaultBranch
	}
	return w.Branch
}

// tracking is the cache's copy of the remote branch.
func (w *Writer) tracking() plumbing.ReferenceName {
	return plumbing.NewRemoteReferenceName("origin", w.branch())
}

// outgoing holds the commit being pushed.
const outgoing = plumbing.ReferenceName("refs/ferry/outgoing")

// remote is the status branch's remote, with its auth method and the
// function that keeps the auth's secrets out of errors. The remote lives in
// the cache's storage, so that the URL is never written to disk.
func (w *Writer) remote() (*git.Remote, transport.AuthMethod, func(error) error, error) {
	url, auth, scrubErr, err := gitsource.Remote(w.URL, w.Auth)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("status repository: %w", err)
	}
	return git.NewRemote(w.store, &config.RemoteConfig{
		Name:  "origin",
		URLs:  []string{url},
		Fetch: []config.RefSpec{w.fetchSpec()},
	}), auth, scrubErr, nil
}

func (w *Writer) fetchSpec() config.RefSpec {
	return config.RefSpec("+" + plumbing.NewBranchReferenceName(w.branch()).String() + ":" + w.tracking().String())
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
		if r.Name() == plumbing.NewBranchReferenceName(w.branch()) {
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
		return plumbing.ZeroHash, fmt.Errorf("fetch branch %s of %s: %w", w.branch(), w.where(), scrubErr(err))
	}
	// The branch may have moved again between the listing and the fetch:
	// what was fetched is the newer head.
	ref, err := w.store.Reference(w.tracking())
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("fetch branch %s of %s: %w", w.branch(), w.where(), err)
	}
	return ref.Hash(), nil
}

// commit stores a commit on head (none: an orphan) that puts the status
// files whose content differs from head's, and returns its ID; the zero
// hash when every file is as head has it. Each file is encoded and stored
// in turn, so that a fleet's statuses are never all in memory as YAML.
func (w *Writer) commit(head plumbing.Hash, files map[string]*PlanStatus) (plumbing.Hash, error) {
	var base *object.Tree
	var parents []plumbing.Hash
	if !head.IsZero() {
		c, err := object.GetCommit(w.store, head)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("read head %s of branch %s: %w", head, w.branch(), err)
		}
		if base, err = c.Tree(); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("read head %s of branch %s: %w", head, w.branch(), err)
		}
		parents = []plumbing.Hash{head}
	}
	changed := map[string]plumbing.Hash{}
	var plans []string
	dirs := treeDirs{root: base}
	for p, st := range files {
		data, err := Encode(st)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		h := plumbing.ComputeHash(plumbing.BlobObject, data)
		if e := dirs.find(p); e != nil && e.Hash == h && e.Mode.IsFile() {
			continue
		}
		if err := storeBlob(w.store, data); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("store %s: %w", p, err)
		}
		w.stored++
		changed[p] = h
		plans = append(plans, strings.TrimSuffix(path.Base(p), ".yaml"))
	}
	if len(changed) == 0 {
		return plumbing.ZeroHash, nil
	}
	sort.Strings(plans)
	root, err := writeTree(w.store, base, changed)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("build status commit on branch %s: %w", w.branch(), err)
	}
	sig := object.Signature{Name: w.AuthorName, Email: w.AuthorEmail, When: time.Now()}
	if sig.Name == "" {
		sig.Name = "ferry"
	}
	if sig.Email == "" {
		sig.Email = gitsource.FerryAuthorEmail
	}
	subject := "ferry: status of " + strings.Join(plans, ", ")
	if len(plans) > 3 {
		subject = fmt.Sprintf("ferry: status of %d plans", len(plans))
	}
	c := &object.Commit{
		Author:       sig,
		Committer:    sig,
		Message:      subject + "\n\n" + gitsource.StatusTrailer + ": true\n",
		TreeHash:     root,
		ParentHashes: parents,
	}
	obj := w.store.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("build status commit on branch %s: %w", w.branch(), err)
	}
	id, err := w.store.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("store status commit on branch %s: %w", w.branch(), err)
	}
	w.stored += 3 // the commit and the two trees along status/
	return id, nil
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
		RefSpecs:   []config.RefSpec{config.RefSpec(outgoing.String() + ":" + plumbing.NewBranchReferenceName(w.branch()).String())},
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

// where is the repository's URL for messages, credentials redacted.
// bound limits one exchange with the remote to Timeout.
func (w *Writer) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	timeout := w.Timeout
	if timeout <= 0 {
		timeout = gitsource.DefaultTimeout
	}
	return context.WithTimeout(ctx, timeout)
}

func (w *Writer) where() string { return gitsource.RedactURL(w.URL) }

var planName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)

// statusPath is Dir/<plan>.yaml; a name that is not a plan's name (a
// Kubernetes object name) is refused rather than let it reach elsewhere in
// the tree.
func statusPath(plan string) (string, error) {
	if !planName.MatchString(plan) || strings.Contains(plan, "..") {
		return "", fmt.Errorf("invalid plan name %q", plan)
	}
	return Dir + "/" + plan + ".yaml", nil
}
