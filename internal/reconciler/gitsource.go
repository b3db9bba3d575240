package reconciler

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/ferry-dev/ferry/internal/gitsource"
)

// GitSource adapts the Git source to the loop. It plans from the newest
// commit that is not ferry's own: a status commit on the tracked branch
// changes no plan, and must not start a new revision (that would retry
// failed steps and re-publish under new IDs).
type GitSource struct {
	Source *gitsource.Source
}

var (
	_ Source     = GitSource{}
	_ PullSource = GitSource{}
	_ Ancestry   = GitSource{}
)

// Poll fetches the branch head if it moved and returns the newest
// non-ferry commit on its first-parent line.
func (g GitSource) Poll(ctx context.Context) (string, bool, error) {
	head, changed, err := g.Source.Poll(ctx)
	if err != nil {
		return "", false, err
	}
	rev := head
	for i := 0; i < 1000; i++ {
		c, err := g.Source.Commit(rev)
		if err != nil {
			return "", false, fmt.Errorf("read commit %s: %w", rev.Short(), err)
		}
		if !gitsource.IsFerryCommit(c) || len(c.Parents) == 0 {
			break
		}
		rev = c.Parents[0]
	}
	return string(rev), changed, nil
}

// FS is the repository's tree at revision.
func (g GitSource) FS(revision string) (fs.FS, error) {
	return g.Source.FS(gitsource.Revision(revision))
}

// PullHeads returns the pull requests' heads the last Poll listed.
func (g GitSource) PullHeads() map[int]string {
	heads := g.Source.PullHeads()
	out := make(map[int]string, len(heads))
	for n, h := range heads {
		out[n] = string(h)
	}
	return out
}

// FetchPull fetches the head of pull request n into the cache.
func (g GitSource) FetchPull(ctx context.Context, n int, head string) error {
	return g.Source.FetchPull(ctx, n, gitsource.Revision(head))
}

// Descends reports whether ancestor is rev or one of its ancestors.
func (g GitSource) Descends(rev, ancestor string) (bool, error) {
	return g.Source.Descends(gitsource.Revision(rev), gitsource.Revision(ancestor))
}
