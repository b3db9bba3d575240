// The Branch's exchanges with the remote: a sync that fetches only when
// the branch moved, and the push.

package gitsource

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// tracking is the cache's copy of the remote branch.
func (b *Branch) tracking() plumbing.ReferenceName {
	return plumbing.NewRemoteReferenceName("origin", b.Name)
}

// outgoing holds the commit being pushed.
const outgoing = plumbing.ReferenceName("refs/ferry/outgoing")

// remote is the branch's remote, with its auth method and the
// function that keeps the auth's secrets out of errors. The remote lives in
// the cache's storage, so that the URL is never written to disk.
func (b *Branch) remote() (*git.Remote, transport.AuthMethod, func(error) error, error) {
	url, auth, scrubErr, err := Remote(b.URL, b.Auth)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("branch %s: %w", b.Name, err)
	}
	return git.NewRemote(b.store, &config.RemoteConfig{
		Name:  "origin",
		URLs:  []string{url},
		Fetch: []config.RefSpec{b.fetchSpec()},
	}), auth, scrubErr, nil
}

func (b *Branch) fetchSpec() config.RefSpec {
	return config.RefSpec("+" + plumbing.NewBranchReferenceName(b.Name).String() + ":" + b.tracking().String())
}

// sync makes the cache hold the remote branch's head and returns it; the
// zero hash when the branch does not exist. Like Flux's source-controller,
// it asks for the remote's references first and fetches only when the
// head moved.
func (b *Branch) sync(ctx context.Context) (plumbing.Hash, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	rem, auth, scrubErr, err := b.remote()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	refs, err := rem.ListContext(ctx, &git.ListOptions{Auth: auth})
	err = scrubErr(err)
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("list references of %s: %w", b.where(), err)
	}
	var remoteHead plumbing.Hash
	for _, r := range refs {
		if r.Name() == plumbing.NewBranchReferenceName(b.Name) {
			remoteHead = r.Hash()
		}
	}
	if remoteHead.IsZero() {
		return plumbing.ZeroHash, nil
	}
	if local, err := b.store.Reference(b.tracking()); err == nil && local.Hash() == remoteHead {
		if _, err := object.GetCommit(b.store, remoteHead); err == nil {
			return remoteHead, nil
		}
	}
	// Only the head commit and its tree: a commit needs its parent and
	// the parent's tree, never the branch's history, which grows with
	// every status commit. Pushes send what the remote's head lacks.
	err = rem.FetchContext(ctx, &git.FetchOptions{
		RemoteName: "origin",
		RefSpecs:   []config.RefSpec{b.fetchSpec()},
		Auth:       auth,
		Tags:       git.NoTags,
		Force:      true,
		Depth:      1,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return plumbing.ZeroHash, fmt.Errorf("fetch branch %s of %s: %w", b.Name, b.where(), scrubErr(err))
	}
	// The branch may have moved again between the listing and the fetch:
	// what was fetched is the newer head.
	ref, err := b.store.Reference(b.tracking())
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("fetch branch %s of %s: %w", b.Name, b.where(), err)
	}
	return ref.Hash(), nil
}

// push sends commit to the branch without force: the server (or go-git,
// seeing the advertised head) rejects it when the branch moved since the
// fetch.
func (b *Branch) push(ctx context.Context, commit plumbing.Hash) error {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	if err := b.store.SetReference(plumbing.NewHashReference(outgoing, commit)); err != nil {
		return fmt.Errorf("set %s: %w", outgoing, err)
	}
	rem, auth, scrubErr, err := b.remote()
	if err != nil {
		return err
	}
	err = rem.PushContext(ctx, &git.PushOptions{
		RemoteName: "origin",
		RefSpecs:   []config.RefSpec{config.RefSpec(outgoing.String() + ":" + plumbing.NewBranchReferenceName(b.Name).String())},
		Auth:       auth,
	})
	if err != nil {
		return scrubErr(err)
	}
	return b.store.SetReference(plumbing.NewHashReference(b.tracking(), commit))
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
