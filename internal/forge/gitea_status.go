// Commit statuses on Gitea.

package forge

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"code.gitea.io/sdk/gitea"

	"github.com/ferry-dev/ferry/internal/failure"
)

// SetStatus creates the commit status statusContext on sha, as
// GitHub.SetStatus does; a sha that Gitea does not have is a terminal error
// although Gitea answers it with 500. Gitea takes "state" in the request, as GitHub
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
		err = g.fail(resp, err, "set status %s on %s", statusContext, sha)
		if resp != nil && resp.StatusCode == http.StatusInternalServerError && strings.Contains(err.Error(), "object does not exist") {
			// Gitea answers 500 for a commit it does not have, where
			// GitHub answers 422: retrying cannot make the commit appear.
			err = failure.Terminal(err)
		}
		return err
	}
	g.count.statuses.Add(1)
	return nil
}
