package main

import (
	"context"
	"errors"
	"flag"
	"io/fs"
	"log/slog"
	"time"

	"github.com/ferry-dev/ferry/internal/gitsource"
)

// gitFlags say which plans repository to read and how to authenticate:
// the same flags for `run` and `executor`.
type gitFlags struct {
	repo, branch, user, tokenFile, sshKey, knownHosts string
	insecure                                          bool
	timeout                                           time.Duration
}

func (g *gitFlags) register(flags *flag.FlagSet, repoUsage string) {
	flags.StringVar(&g.repo, "repo", "", repoUsage)
	flags.StringVar(&g.branch, "branch", gitsource.DefaultBranch, "branch of the plans repository to follow: spec.approve on it approves phases")
	g.registerAuth(flags)
}

// registerAuth registers how to authenticate to the repository and how
// long an exchange with it may take.
func (g *gitFlags) registerAuth(flags *flag.FlagSet) {
	flags.StringVar(&g.user, "git-username", "git", "user name sent with --git-token-file")
	flags.StringVar(&g.tokenFile, "git-token-file", "", "file holding a token for https access to the repository")
	flags.StringVar(&g.sshKey, "ssh-key-file", "", "private key for ssh access to the repository")
	flags.StringVar(&g.knownHosts, "ssh-known-hosts", "", "known_hosts file that ssh host keys are checked against")
	flags.BoolVar(&g.insecure, "ssh-insecure-ignore-host-key", false, "do not check ssh host keys (never in production)")
	flags.DurationVar(&g.timeout, "git-timeout", gitsource.DefaultTimeout, "bound on each exchange with the Git remote (ls-remote, fetch, push); one that hangs fails and is retried")
}

// source opens the repository with its cache in cacheDir.
func (g *gitFlags) source(path, cacheDir string, log *slog.Logger) (*gitsource.Source, error) {
	return gitsource.New(gitsource.Config{
		URL: g.repo, Branch: g.branch, Path: path, CacheDir: cacheDir, Logger: log, Timeout: g.timeout, Auth: g.auth(),
	})
}

// auth is how to authenticate to the repository, for reading and for
// pushing statuses alike.
func (g *gitFlags) auth() gitsource.Auth {
	return gitsource.Auth{Username: g.user, TokenFile: g.tokenFile, SSHKeyFile: g.sshKey, KnownHostsFile: g.knownHosts, InsecureIgnoreHostKey: g.insecure}
}

// repoAt reads the plans repository at a step's revision for the executors
// (manifests), fetching the branch when the revision is newer than the
// cache: steps are published from the tracked branch's commits.
func repoAt(src *gitsource.Source) func(context.Context, string) (fs.FS, error) {
	return func(ctx context.Context, rev string) (fs.FS, error) {
		fsys, err := src.FS(gitsource.Revision(rev))
		if !errors.Is(err, gitsource.ErrUnknownRevision) {
			return fsys, err
		}
		if _, _, err := src.Poll(ctx); err != nil {
			return nil, err
		}
		return src.FS(gitsource.Revision(rev))
	}
}
