// GitHub's side of ferry's one comment per key: find it once, then edit or
// create it, and remember it so that later updates cost one call or none.

package forge

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-github/v60/github"

	"github.com/ferry-dev/ferry/internal/failure"
)

type commentKey struct {
	pr  int
	key string
}

type postedComment struct {
	id   int64
	body string
}

// UpsertComment keeps ferry's one comment for key on pull request pr equal
// to body. It looks for the comment (the first one whose body starts with
// Marker(key), among the pull request's first 500 comments) only when this
// process has not written or found it before; then it edits the comment if
// its body differs, creates it if there is none, and sends nothing when the
// body is already there. Comments by anyone else never start with the
// marker and are never edited. A comment deleted by hand is created again.
func (g *GitHub) UpsertComment(ctx context.Context, pr int, key, body string) error {
	if err := checkKey(key); err != nil {
		return failure.Terminal(fmt.Errorf("upsert comment on #%d: %w", pr, err))
	}
	body = frameBody(key, body)
	ck := commentKey{pr: pr, key: key}
	g.mu.Lock()
	c, known := g.comments[ck]
	g.mu.Unlock()
	if !known {
		var err error
		if c, known, err = g.findComment(ctx, pr, key); err != nil {
			return err
		}
	}
	if known {
		if c.body == body {
			g.remember(ck, c)
			g.count.unchanged.Add(1)
			return nil
		}
		_, _, err := g.client.Issues.EditComment(ctx, g.owner, g.repo, c.id, &github.IssueComment{Body: &body})
		switch {
		case err == nil:
			g.remember(ck, postedComment{id: c.id, body: body})
			g.count.edited.Add(1)
			return nil
		case statusCode(err) == http.StatusNotFound:
			// Deleted by hand since: forget it and post it again.
			g.forget(ck)
		default:
			return g.fail(err, "edit comment %d on #%d", c.id, pr)
		}
	}
	created, _, err := g.client.Issues.CreateComment(ctx, g.owner, g.repo, pr, &github.IssueComment{Body: &body})
	if err != nil {
		return g.fail(err, "comment on #%d", pr)
	}
	g.remember(ck, postedComment{id: created.GetID(), body: body})
	g.count.created.Add(1)
	return nil
}

// findComment pages through the pull request's comments (oldest first) for
// the first that starts with the marker of key.
func (g *GitHub) findComment(ctx context.Context, pr int, key string) (postedComment, bool, error) {
	marker := Marker(key)
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: perPage}}
	for page := 0; page < maxCommentPages; page++ {
		list, resp, err := g.client.Issues.ListComments(ctx, g.owner, g.repo, pr, opts)
		if err != nil {
			return postedComment{}, false, g.fail(err, "list comments of #%d", pr)
		}
		for _, c := range list {
			if strings.HasPrefix(c.GetBody(), marker) {
				return postedComment{id: c.GetID(), body: c.GetBody()}, true, nil
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return postedComment{}, false, nil
}

func (g *GitHub) remember(ck commentKey, c postedComment) {
	g.mu.Lock()
	g.comments[ck] = c
	g.mu.Unlock()
}

func (g *GitHub) forget(ck commentKey) {
	g.mu.Lock()
	delete(g.comments, ck)
	g.mu.Unlock()
}
