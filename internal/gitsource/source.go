package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/ferry-dev/ferry/internal/failure"
)

// Defaults of Config.
const (
	DefaultBranch = "main"
	DefaultPath   = "plans/"
	// DefaultTimeout bounds one Poll or FetchPull: a remote that accepts
	// the connection and never answers fails the call, and the caller's
	// next cycle tries again.
	DefaultTimeout = time.Minute
)

// ErrBranchNotFound is returned by Poll when the remote has no such branch
// (or is empty). It is not terminal: the branch may yet be pushed.
var ErrBranchNotFound = errors.New("branch not found")

// ErrUnknownRevision is returned for a revision that is not a commit in the
// local cache: not a hash, or not fetched by Poll.
var ErrUnknownRevision = errors.New("unknown revision")

// Revision is a commit ID of the plans repository, as full lowercase hex.
type Revision string

// String returns the full commit ID.
func (r Revision) String() string { return string(r) }

// Short returns the first 12 characters, for messages; Git's usual 7 can
// be ambiguous in a large repository.
func (r Revision) Short() string {
	if len(r) > 12 {
		return string(r[:12])
	}
	return string(r)
}

func (r Revision) hash() (plumbing.Hash, error) {
	if !plumbing.IsHash(string(r)) {
		return plumbing.ZeroHash, fmt.Errorf("revision %q: %w", string(r), ErrUnknownRevision)
	}
	return plumbing.NewHash(string(r)), nil
}

// Config says which repository, branch and directory to follow.
type Config struct {
	// URL of the repository: https://, http://, ssh://, user@host:path,
	// file:// or a local path to a (bare) repository.
	URL string
	// Branch to follow; DefaultBranch when empty.
	Branch string
	// Path is the directory of plan files in the repository; DefaultPath
	// when empty. See Source.PlansDir.
	Path string
	// CacheDir holds the local bare repository that fetches go into. It is
	// created when missing; when it exists it must be empty or such a
	// repository, so that a wrong path is never filled or cleared. Kept
	// across restarts, it spares a full clone. One Source per CacheDir.
	CacheDir string
	// Auth for the repository; the zero value is none.
	Auth Auth
	// CAFile is a PEM bundle of extra certificate authorities for https,
	// for a forge behind a private CA.
	CAFile string
	// Logger receives a line before each fetch; nil uses slog.Default().
	Logger *slog.Logger
	// Timeout bounds each Poll and FetchPull, however long the caller's
	// context allows; DefaultTimeout when zero.
	Timeout time.Duration
}

// Source follows one branch of the plans repository. Poll brings the local
// cache up to date; FS, Commit and Introduced read the cache at a revision
// that Poll returned. Its methods are safe for concurrent use; reads wait
// while a fetch writes to the cache.
type Source struct {
	ep       endpoint
	auth     Auth
	caFile   string
	branch   plumbing.ReferenceName
	tracking plumbing.ReferenceName
	plansDir string
	log      *slog.Logger
	timeout  time.Duration

	// pollMu makes Polls take turns, so that two never fetch at once.
	pollMu sync.Mutex
	// last is the revision the previous Poll returned; guarded by pollMu.
	last Revision
	// pulls are the pull-request heads the last ls-remote listed; guarded
	// by pullsMu (PullHeads reads them between Polls).
	pullsMu sync.Mutex
	pulls   map[int]Revision

	// mu guards repo: go-git's file storage is not safe for a read during
	// a fetch, nor for concurrent reads (it loads pack indexes lazily).
	mu   sync.Mutex
	repo *git.Repository

	polls, lsRemotes, fetches, failures atomic.Uint64
}

// New checks the configuration and opens (or creates) the cache. It does
// not contact the remote; the first Poll does.
func New(cfg Config) (*Source, error) {
	if cfg.URL == "" {
		return nil, errors.New("git source: no repository URL")
	}
	ep, err := parseEndpoint(cfg.URL)
	if err != nil {
		return nil, err
	}
	if err := cfg.Auth.check(ep); err != nil {
		return nil, err
	}
	if cfg.CAFile != "" {
		if _, err := os.Stat(cfg.CAFile); err != nil {
			return nil, fmt.Errorf("repository %s: CA bundle: %w", ep.display, err)
		}
	}
	branch := cfg.Branch
	if branch == "" {
		branch = DefaultBranch
	}
	ref := plumbing.NewBranchReferenceName(branch)
	if err := ref.Validate(); err != nil {
		return nil, fmt.Errorf("repository %s: branch %q: %w", ep.display, branch, err)
	}
	dir, err := cleanDir(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("repository %s: %w", ep.display, err)
	}
	if cfg.CacheDir == "" {
		return nil, fmt.Errorf("repository %s: no cache directory", ep.display)
	}
	repo, err := openCache(cfg.CacheDir)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.Auth.InsecureIgnoreHostKey {
		log.Warn("SSH host key of the plans repository is not checked; anyone who can intercept the connection can serve plans",
			"url", ep.display)
	}
	if ep.protocol == "http" && (cfg.Auth.TokenFile != "" || ep.password != "" || ep.user != "") {
		log.Warn("credentials for the plans repository are sent over plain http", "url", ep.display)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Source{
		timeout:  timeout,
		ep:       ep,
		auth:     cfg.Auth,
		caFile:   cfg.CAFile,
		branch:   ref,
		tracking: plumbing.NewRemoteReferenceName("origin", branch),
		plansDir: dir,
		log:      log,
		repo:     repo,
	}, nil
}

// cleanDir turns Config.Path into an io/fs path: "plans/" becomes "plans",
// and the repository root is ".".
func cleanDir(p string) (string, error) {
	if p == "" {
		p = DefaultPath
	}
	c := strings.Trim(path.Clean("/"+p), "/")
	if c == "" {
		c = "."
	}
	if !fs.ValidPath(c) {
		return "", fmt.Errorf("plans path %q: not a path inside the repository", p)
	}
	return c, nil
}

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

// URL returns the repository URL with credentials redacted, for logs.
func (s *Source) URL() string { return s.ep.display }

// Branch returns the branch the Source follows.
func (s *Source) Branch() string { return s.branch.Short() }

// PlansDir returns the plans directory as an io/fs path ("plans" for the
// default "plans/"), ready for planfile.LoadFS(fsys, src.PlansDir()).
func (s *Source) PlansDir() string { return s.plansDir }

// Stats counts what the Source asked of the remote since it was created,
// for metrics.
type Stats struct {
	// Polls counts calls of Poll.
	Polls uint64
	// LsRemotes counts requests for the remote's branch head (the cheap
	// `git ls-remote` every poll makes).
	LsRemotes uint64
	// Fetches counts fetches of objects (the expensive part, which the
	// ls-remote avoids when the head has not moved).
	Fetches uint64
	// Failures counts Polls that returned an error.
	Failures uint64
}

// Stats returns the counters.
func (s *Source) Stats() Stats {
	return Stats{
		Polls:     s.polls.Load(),
		LsRemotes: s.lsRemotes.Load(),
		Fetches:   s.fetches.Load(),
		Failures:  s.failures.Load(),
	}
}

// Poll asks the remote for the head of the branch and makes sure the cache
// holds it. changed reports whether the head differs from the one the
// previous Poll returned (the first successful Poll is always a change).
// When the head equals it, Poll returns without fetching; when the cache
// already holds the commit (after a restart, or when the branch was reset
// to an older commit), it does not fetch either. A fetch takes the whole
// history of the branch, which Introduced needs.
//
// Poll talks to the remote for as long as ctx allows, and no longer than
// Config.Timeout. Errors are wrapped with the (redacted) URL; those that retrying cannot
// fix (authentication, authorization, a missing repository, a host key
// that is unknown or does not match) are failure.Terminal. On error the
// Revision is empty, and the next Poll compares with the revision the last
// successful one returned.
func (s *Source) Poll(ctx context.Context) (rev Revision, changed bool, err error) {
	s.pollMu.Lock()
	defer s.pollMu.Unlock()
	s.polls.Add(1)
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	rev, changed, err = s.poll(ctx)
	if err != nil {
		s.failures.Add(1)
		return "", false, err
	}
	return rev, changed, nil
}

func (s *Source) poll(ctx context.Context) (Revision, bool, error) {
	auth, secrets, err := s.auth.method(s.ep)
	if err != nil {
		// Credential files a person must fix; the error names files only.
		return "", false, failure.Terminal(fmt.Errorf("poll %s: %w", s.ep.display, err))
	}
	ca, err := s.caBundle()
	if err != nil {
		return "", false, failure.Terminal(fmt.Errorf("poll %s: %w", s.ep.display, err))
	}

	head, err := s.remoteHead(ctx, auth, ca)
	if err != nil {
		return "", false, s.classify(fmt.Errorf("ls-remote %s: %w", s.ep.display, scrub(err, secrets)))
	}
	if head == s.last {
		return head, false, nil
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	have, err := s.hasCommit(head)
	if err != nil {
		return "", false, fmt.Errorf("poll %s: %w", s.ep.display, err)
	}
	if !have {
		s.log.InfoContext(ctx, "fetching plans repository", "url", s.ep.display, "branch", s.branch.Short(), "head", head.Short())
		if err := s.fetch(ctx, auth, ca); err != nil {
			return "", false, s.classify(fmt.Errorf("fetch %s: %w", s.ep.display, scrub(err, secrets)))
		}
	} else if err := s.repo.Storer.SetReference(plumbing.NewHashReference(s.tracking, plumbing.NewHash(string(head)))); err != nil {
		return "", false, fmt.Errorf("poll %s: record head %s: %w", s.ep.display, head.Short(), err)
	}
	// The branch may have moved between the ls-remote and the fetch: what
	// was fetched is the newer truth.
	ref, err := s.repo.Storer.Reference(s.tracking)
	if err != nil {
		return "", false, fmt.Errorf("poll %s: read fetched head: %w", s.ep.display, err)
	}
	got := Revision(ref.Hash().String())
	changed := got != s.last
	s.last = got
	return got, changed, nil
}

// remoteHead is `git ls-remote URL refs/heads/<branch>`. The remote lives
// in memory: listing needs no cache, so it does not wait for a reader.
func (s *Source) remoteHead(ctx context.Context, auth transport.AuthMethod, ca []byte) (Revision, error) {
	s.lsRemotes.Add(1)
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{s.ep.clean}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: auth, CABundle: ca})
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return "", fmt.Errorf("%s: %w (the repository is empty)", s.branch.Short(), ErrBranchNotFound)
	}
	if err != nil {
		return "", err
	}
	var head Revision
	pulls := map[int]Revision{}
	for _, r := range refs {
		if r.Name() == s.branch {
			head = Revision(r.Hash().String())
		}
		if n, ok := pullNumber(r.Name()); ok && r.Type() == plumbing.HashReference {
			pulls[n] = Revision(r.Hash().String())
		}
	}
	s.pullsMu.Lock()
	s.pulls = pulls
	s.pullsMu.Unlock()
	if head == "" {
		return "", fmt.Errorf("%s: %w", s.branch.Short(), ErrBranchNotFound)
	}
	return head, nil
}

// fetch brings the branch, with its whole history, into the cache under
// refs/remotes/origin/<branch>. The refspec forces the update, so that a
// branch that was force-pushed is followed rather than refused. Callers
// hold s.mu.
func (s *Source) fetch(ctx context.Context, auth transport.AuthMethod, ca []byte) error {
	s.fetches.Add(1)
	remote := git.NewRemote(s.repo.Storer, &config.RemoteConfig{Name: "origin", URLs: []string{s.ep.clean}})
	spec := config.RefSpec(fmt.Sprintf("+%s:%s", s.branch, s.tracking))
	err := remote.FetchContext(ctx, &git.FetchOptions{
		RefSpecs: []config.RefSpec{spec},
		Auth:     auth,
		CABundle: ca,
		Tags:     git.NoTags,
	})
	if errors.Is(err, git.NoErrAlreadyUpToDate) {
		return nil
	}
	return err
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

func (s *Source) caBundle() ([]byte, error) {
	if s.caFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(s.caFile)
	if err != nil {
		return nil, fmt.Errorf("read CA bundle: %w", err)
	}
	return b, nil
}

// classify marks the errors that only a person can fix as terminal, and
// says which file to fix for a host key that was not accepted.
func (s *Source) classify(err error) error {
	var keyErr *knownhosts.KeyError
	var revoked *knownhosts.RevokedError
	if errors.As(err, &keyErr) {
		err = fmt.Errorf("%w (the server's host key is not the one for %s in %s; "+
			"if the key was changed on purpose, verify and update that file)", err, s.ep.hostPort, s.auth.KnownHostsFile)
	}
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired),
		errors.Is(err, transport.ErrAuthorizationFailed),
		errors.Is(err, transport.ErrRepositoryNotFound),
		errors.Is(err, transport.ErrInvalidAuthMethod),
		errors.As(err, &keyErr),
		errors.As(err, &revoked):
		return failure.Terminal(err)
	}
	return err
}
