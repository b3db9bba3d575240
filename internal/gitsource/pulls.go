package gitsource

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
)

// pullNumber reads N from refs/pull/N/head, the read-only ref under which
// GitHub (and Gitea, and GitLab's refs/merge-requests mirror) publishes
// the head of every pull request on the base repository, forks included.
func pullNumber(name plumbing.ReferenceName) (int, bool) {
	rest, ok := strings.CutPrefix(string(name), "refs/pull/")
	if !ok {
		return 0, false
	}
	num, ok := strings.CutSuffix(rest, "/head")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(num)
	return n, err == nil && n > 0
}

// PullHeads returns the pull-request heads (refs/pull/N/head) that the
// last Poll's ls-remote listed, by number. They come with the ls-remote
// every Poll makes anyway, so a caller can tell that a pull request was
// opened or pushed to without asking the forge's API.
func (s *Source) PullHeads() map[int]Revision {
	s.pullsMu.Lock()
	defer s.pullsMu.Unlock()
	return maps.Clone(s.pulls)
}

// FetchPull makes sure the cache holds head, the head commit of pull
// request n, fetching refs/pull/N/head into refs/ferry/pull/N when it does
// not. Afterwards FS(head) reads the pull request's tree. head guards
// against a push between the caller's look and the fetch: the fetched ref
// must contain it. Like Poll, it takes no longer than Config.Timeout.
func (s *Source) FetchPull(ctx context.Context, n int, head Revision) error {
	if n <= 0 {
		return fmt.Errorf("pull request number %d: not positive", n)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	have, err := s.hasCommit(head)
	if err != nil || have {
		return err
	}
	auth, secrets, err := s.auth.method(s.ep)
	if err != nil {
		return fmt.Errorf("fetch pull request #%d from %s: %w", n, s.ep.display, err)
	}
	ca, err := s.caBundle()
	if err != nil {
		return fmt.Errorf("fetch pull request #%d from %s: %w", n, s.ep.display, err)
	}
	s.fetches.Add(1)
	s.log.InfoContext(ctx, "fetching pull request head", "url", s.ep.display, "pr", n, "head", head.Short())
	remote := git.NewRemote(s.repo.Storer, &config.RemoteConfig{Name: "origin", URLs: []string{s.ep.clean}})
	spec := config.RefSpec(fmt.Sprintf("+refs/pull/%d/head:refs/ferry/pull/%d", n, n))
	err = remote.FetchContext(ctx, &git.FetchOptions{RefSpecs: []config.RefSpec{spec}, Auth: auth, CABundle: ca, Tags: git.NoTags})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return s.classify(fmt.Errorf("fetch pull request #%d from %s: %w", n, s.ep.display, scrub(err, secrets)))
	}
	if have, err = s.hasCommit(head); err != nil {
		return err
	}
	if !have {
		return fmt.Errorf("pull request #%d: head %s is not in refs/pull/%d/head any more (pushed again?)", n, head.Short(), n)
	}
	return nil
}
