package app

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"time"

	"github.com/ferry-dev/ferry/internal/gitsource"
)

// Git says which plans repository to read and how to authenticate: the
// same for every command that reads it.
type Git struct {
	// URL of the plans repository (https://, ssh:// or file://).
	URL string
	// Branch is the tracked branch; spec.approve on it approves phases.
	Branch string
	// Auth is how to authenticate, for reading and pushing alike.
	Auth gitsource.Auth
	// Timeout bounds each exchange with the remote (0: gitsource's default).
	Timeout time.Duration
}

// source opens the repository with its cache in cacheDir.
func (g Git) source(path, cacheDir string, log *slog.Logger) (*gitsource.Source, error) {
	return gitsource.New(gitsource.Config{
		URL: g.URL, Branch: g.Branch, Path: path, CacheDir: cacheDir, Logger: log, Timeout: g.Timeout, Auth: g.Auth,
	})
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
