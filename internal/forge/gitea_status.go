// Commit statuses on Gitea.

package forge

import (
	"context"
	"fmt"

	"code.gitea.io/sdk/gitea"

	"github.com/ferry-dev/ferry/internal/failure"
)

// SetStatus creates the commit status statusContext on sha, as
// GitHub.SetStatus does. Gitea takes "state" in the request, as GitHub
// does, but names it "status" in its answers (go-github reads no state
// back from Gitea; the SDK does).
func (g *Gitea) SetStatus(ctx context.Context, sha, statusContext, state, description, targetURL string) error {
	if err := checkStatus(sha, state); err != nil {
		return failure.Terminal(fmt.Errorf("set status %s: %w", statusContext, err))
	}
	opts := gitea.CreateStatusOption{
		State:       gitea.StatusState(state),
		Context:     statusContext,
		Description: shorten(description, MaxStatusDescription),
		TargetURL:   targetURL,
	}
	if _, resp, err := g.api(ctx).CreateStatus(g.owner, g.repo, sha, opts); err != nil {
		return g.fail(resp, err, "set status %s on %s", statusContext, sha)
	}
	g.count.statuses.Add(1)
	return nil
}
