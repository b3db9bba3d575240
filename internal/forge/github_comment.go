// GitHub's side of ferry's one comment per key (see upsertComment), the
// comments people write, and their authors' permissions.

package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/ferry-dev/ferry/internal/failure"
)

// UpsertComment keeps ferry's one comment for key on pull request pr equal
// to body; see upsertComment for what it reads and sends.
func (g *GitHub) UpsertComment(ctx context.Context, pr int, key, body string) error {
	return upsertComment(ctx, g, g.memo, g.count, pr, key, body)
}

// Login returns the login of the account the token authenticates as,
// asked of GitHub once: GET /user for a person's token; for a GitHub App's
// installation token, which GET /user refuses (403, "Resource not
// accessible by integration"), GraphQL's viewer, the app's bot account
// ("name[bot]").
func (g *GitHub) Login(ctx context.Context) (string, error) {
	return g.memo.login(ctx, g.whoAmI)
}

func (g *GitHub) whoAmI(ctx context.Context) (string, error) {
	u, _, err := g.client.Users.Get(ctx, "")
	if err == nil {
		return u.GetLogin(), nil
	}
	if _, limited := retryAt(err, time.Now(), 0); limited || statusCode(err) != http.StatusForbidden {
		return "", g.fail(err, "read the token's account")
	}
	req, err := g.client.NewRequest(http.MethodPost, "../graphql", map[string]string{"query": "query { viewer { login } }"})
	if err != nil {
		return "", failure.Terminal(fmt.Errorf("read the token's account: %w", err))
	}
	var out struct {
		Data struct {
			Viewer struct {
				Login string `json:"login"`
			} `json:"viewer"`
		} `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if _, err := g.client.Do(ctx, req, &out); err != nil {
		return "", g.fail(err, "read the token's account (GraphQL viewer)")
	}
	if len(out.Errors) > 0 {
		// GraphQL answers 200 with its errors in the body: a token GitHub
		// refuses to name stays refused.
		return "", failure.Terminal(fmt.Errorf("read the token's account (GraphQL viewer) in %s/%s: %s", g.owner, g.repo, out.Errors[0].Message))
	}
	return out.Data.Viewer.Login, nil
}

// PullRequestComments lists the comments on pull request pr, oldest first,
// at most 500.
func (g *GitHub) PullRequestComments(ctx context.Context, pr int) ([]IssueComment, error) {
	return allComments(ctx, g, pr)
}

func (g *GitHub) listComments(ctx context.Context, pr, page int) ([]IssueComment, int, error) {
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: perPage, Page: page}}
	list, resp, err := g.client.Issues.ListComments(ctx, g.owner, g.repo, pr, opts)
	if err != nil {
		return nil, 0, g.fail(err, "list comments of #%d", pr)
	}
	cs := make([]IssueComment, 0, len(list))
	for _, c := range list {
		cs = append(cs, IssueComment{ID: c.GetID(), Author: c.GetUser().GetLogin(), Body: c.GetBody(), Created: c.GetCreatedAt().Time})
	}
	return cs, resp.NextPage, nil
}

func (g *GitHub) editComment(ctx context.Context, pr int, id int64, body string) error {
	if _, _, err := g.client.Issues.EditComment(ctx, g.owner, g.repo, id, &github.IssueComment{Body: &body}); err != nil {
		return g.fail(err, "edit comment %d on #%d", id, pr)
	}
	return nil
}

func (g *GitHub) createComment(ctx context.Context, pr int, body string) (int64, error) {
	c, _, err := g.client.Issues.CreateComment(ctx, g.owner, g.repo, pr, &github.IssueComment{Body: &body})
	if err != nil {
		return 0, g.fail(err, "comment on #%d", pr)
	}
	return c.GetID(), nil
}

// Permission asks GitHub for login's permission on the repository
// (collaborators/{login}/permission). GitHub answers admin, write, read or
// none, folding maintain into write and triage into read; an account that
// does not exist is none. The token needs push access to ask.
func (g *GitHub) Permission(ctx context.Context, login string) (string, error) {
	if login == "" {
		return "", failure.Terminal(errors.New("permission: empty login"))
	}
	p, _, err := g.client.Repositories.GetPermissionLevel(ctx, g.owner, g.repo, login)
	if err != nil {
		if statusCode(err) == http.StatusNotFound {
			return PermissionNone, nil
		}
		return "", g.fail(err, "permission of %s", login)
	}
	return foldPermission(p.GetPermission()), nil
}

// foldPermission maps a forge's role name to one of Permission's four.
func foldPermission(p string) string {
	switch p {
	case "admin", "owner":
		return PermissionAdmin
	case "write", "maintain":
		return PermissionWrite
	case "read", "triage":
		return PermissionRead
	}
	return PermissionNone
}
