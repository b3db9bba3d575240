// Gitea's side of ferry's one comment per key (see upsertComment), the
// comments people write, and their authors' permissions.

package forge

import (
	"context"
	"errors"
	"net/http"

	"code.gitea.io/sdk/gitea"

	"github.com/ferry-dev/ferry/internal/failure"
)

// UpsertComment keeps ferry's one comment for key on pull request pr equal
// to body; see upsertComment for what it reads and sends.
func (g *Gitea) UpsertComment(ctx context.Context, pr int, key, body string) error {
	return upsertComment(ctx, g, g.memo, g.count, pr, key, body)
}

// Login returns the login of the account the token authenticates as
// (GET /user), asked of Gitea once.
func (g *Gitea) Login(ctx context.Context) (string, error) {
	return g.memo.login(ctx, g.whoAmI)
}

func (g *Gitea) whoAmI(ctx context.Context) (string, error) {
	u, resp, err := g.api(ctx).GetMyUserInfo()
	if err != nil {
		return "", g.fail(resp, err, "read the token's account")
	}
	if u == nil {
		return "", nil
	}
	return u.UserName, nil
}

// PullRequestComments lists the comments on pull request pr, oldest first,
// at most 500.
func (g *Gitea) PullRequestComments(ctx context.Context, pr int) ([]IssueComment, error) {
	return allComments(ctx, g, pr)
}

func (g *Gitea) listComments(ctx context.Context, pr, page int) ([]IssueComment, int, error) {
	opts := gitea.ListIssueCommentOptions{ListOptions: gitea.ListOptions{Page: page, PageSize: perPage}}
	list, resp, err := g.api(ctx).ListIssueComments(g.owner, g.repo, int64(pr), opts)
	if err != nil {
		return nil, 0, g.fail(resp, err, "list comments of #%d", pr)
	}
	cs := make([]IssueComment, 0, len(list))
	for _, c := range list {
		ic := IssueComment{ID: c.ID, Body: c.Body, Created: c.Created}
		if c.Poster != nil {
			ic.Author = c.Poster.UserName
		}
		cs = append(cs, ic)
	}
	return cs, resp.NextPage, nil
}

func (g *Gitea) editComment(ctx context.Context, pr int, id int64, body string) error {
	if _, resp, err := g.api(ctx).EditIssueComment(g.owner, g.repo, id, gitea.EditIssueCommentOption{Body: body}); err != nil {
		return g.fail(resp, err, "edit comment %d on #%d", id, pr)
	}
	return nil
}

func (g *Gitea) createComment(ctx context.Context, pr int, body string) (int64, error) {
	c, resp, err := g.api(ctx).CreateIssueComment(g.owner, g.repo, int64(pr), gitea.CreateIssueCommentOption{Body: body})
	if err != nil {
		return 0, g.fail(resp, err, "comment on #%d", pr)
	}
	return c.ID, nil
}

// Permission asks Gitea for login's permission on the repository
// (collaborators/{login}/permission): Gitea computes it from ownership,
// teams, collaboration and the repository's visibility, and answers owner,
// admin, write, read or none; owner counts as admin. An account that does
// not exist is none. The token's account must be a site or repository
// admin to ask about others.
func (g *Gitea) Permission(ctx context.Context, login string) (string, error) {
	if login == "" {
		return "", failure.Terminal(errors.New("permission: empty login"))
	}
	p, resp, err := g.api(ctx).CollaboratorPermission(g.owner, g.repo, login)
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return PermissionNone, nil
		}
		return "", g.fail(resp, err, "permission of %s", login)
	}
	if p == nil {
		return PermissionNone, nil
	}
	return foldPermission(string(p.Permission)), nil
}
