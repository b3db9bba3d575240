// Talking to the remote: ls-remote for the branch head (and pull request
// heads), a fetch only when the head is not in the cache, and errors
// classified by whether retrying can help.

package gitsource

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/ferry-dev/ferry/internal/failure"
)

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
