package observed

import (
	"context"
	"io/fs"
)

type repoKey struct{}

// WithRepo returns ctx carrying fsys, the plans repository's tree at the
// revision being planned, where an observation reads the manifests a plan
// names. Each reconcile carries its own revision's tree, so that two plans
// observed at once at different revisions never read each other's.
func WithRepo(ctx context.Context, fsys fs.FS) context.Context {
	return context.WithValue(ctx, repoKey{}, fsys)
}

// Repo returns the tree WithRepo put in ctx, or nil.
func Repo(ctx context.Context) fs.FS {
	fsys, _ := ctx.Value(repoKey{}).(fs.FS)
	return fsys
}
