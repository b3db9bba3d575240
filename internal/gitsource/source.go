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

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
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
	warnInsecure(log, cfg, ep)
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

// warnInsecure logs, once when the Source is made, the settings that expose
// the plans repository: an SSH host key that is not checked, credentials
// sent over plain http.
func warnInsecure(log *slog.Logger, cfg Config, ep endpoint) {
	if cfg.Auth.InsecureIgnoreHostKey {
		log.Warn("SSH host key of the plans repository is not checked; anyone who can intercept the connection can serve plans",
			"url", ep.display)
	}
	if ep.protocol == "http" && (cfg.Auth.TokenFile != "" || ep.password != "" || ep.user != "") {
		log.Warn("credentials for the plans repository are sent over plain http", "url", ep.display)
	}
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
