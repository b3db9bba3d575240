// Commit statuses on GitHub, and the checks and cut shared with the Coalescer.

package forge

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-github/v60/github"

	"github.com/ferry-dev/ferry/internal/failure"
)

// SetStatus creates the commit status statusContext on sha. An unknown state
// or an empty sha is a terminal error and sends nothing; description is cut
// to MaxStatusDescription characters, with an ellipsis.
func (g *GitHub) SetStatus(ctx context.Context, sha, statusContext, state, description, targetURL string) error {
	if err := checkStatus(sha, state); err != nil {
		return failure.Terminal(fmt.Errorf("set status %s: %w", statusContext, err))
	}
	st := &github.RepoStatus{State: &state}
	if statusContext != "" {
		st.Context = &statusContext
	}
	if description = shorten(description, MaxStatusDescription); description != "" {
		st.Description = &description
	}
	if targetURL != "" {
		st.TargetURL = &targetURL
	}
	if _, _, err := g.client.Repositories.CreateStatus(ctx, g.owner, g.repo, sha, st); err != nil {
		return g.fail(err, "set status %s on %s", statusContext, sha)
	}
	g.count.statuses.Add(1)
	return nil
}

func checkStatus(sha, state string) error {
	if sha == "" {
		return errors.New("empty sha")
	}
	switch state {
	case StatePending, StateSuccess, StateFailure, StateError:
		return nil
	}
	return fmt.Errorf("state %q is not one of pending, success, failure, error", state)
}

// shorten cuts s to at most n characters, the last an ellipsis when it cut.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
