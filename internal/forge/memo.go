// What a forge client remembers between calls, and the comment upsert built
// on it, shared by GitHub and Gitea: both list, edit and create comments the
// same way, through commentAPI.

package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

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

type prFiles struct {
	head  string
	files []string
}

// memo is what a client learnt from the forge that cannot have changed, or
// that only this process changes: the token's login, ferry's own comments,
// a pull request's files at a head commit, merged pull requests. Safe for
// concurrent use.
type memo struct {
	mu       sync.Mutex
	self     string                       // the token's login, once asked
	comments map[commentKey]postedComment // ferry's comments found or written by this process
	files    map[int]prFiles              // by pull request number
	merged   map[int]PullRequest          // merged pull requests: they no longer change
	byCommit map[string]PullRequest       // merged pull requests by the commit their merge wrote
}

func newMemo() *memo {
	return &memo{comments: map[commentKey]postedComment{}, files: map[int]prFiles{}, merged: map[int]PullRequest{},
		byCommit: map[string]PullRequest{}}
}

// login returns the login of the token's account, asking the forge through
// ask the first time (and again after a failure): a token's account does
// not change while the process runs.
func (m *memo) login(ctx context.Context, ask func(context.Context) (string, error)) (string, error) {
	m.mu.Lock()
	self := m.self
	m.mu.Unlock()
	if self != "" {
		return self, nil
	}
	self, err := ask(ctx)
	if err != nil {
		return "", err
	}
	if self == "" {
		return "", failure.Terminal(errors.New("read the token's account: the forge answered no login"))
	}
	m.mu.Lock()
	m.self = self
	m.mu.Unlock()
	return self, nil
}

func (m *memo) comment(ck commentKey) (postedComment, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.comments[ck]
	return c, ok
}

func (m *memo) remember(ck commentKey, c postedComment) {
	m.mu.Lock()
	m.comments[ck] = c
	m.mu.Unlock()
}

func (m *memo) forget(ck commentKey) {
	m.mu.Lock()
	delete(m.comments, ck)
	m.mu.Unlock()
}

func (m *memo) mergedPR(number int) (PullRequest, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pr, ok := m.merged[number]
	return pr, ok
}

// keepMerged remembers pr when it is merged.
func (m *memo) keepMerged(pr PullRequest) {
	if !pr.Merged {
		return
	}
	m.mu.Lock()
	if len(m.merged) >= maxMergedEntries {
		clear(m.merged)
	}
	m.merged[pr.Number] = pr
	m.mu.Unlock()
}

func (m *memo) mergedCommit(sha string) (PullRequest, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pr, ok := m.byCommit[sha]
	return pr, ok
}

// keepMergedCommit remembers pr, when merged, as the pull request of sha.
func (m *memo) keepMergedCommit(sha string, pr PullRequest) {
	if !pr.Merged {
		return
	}
	m.mu.Lock()
	if len(m.byCommit) >= maxMergedEntries {
		clear(m.byCommit)
	}
	m.byCommit[sha] = pr
	m.mu.Unlock()
}

// withFiles fills in the files of each open pull request, asking changed
// for those whose head moved since, and forgets the pull requests no longer
// open.
func (m *memo) withFiles(ctx context.Context, prs []PullRequest, changed func(context.Context, int) ([]string, error)) error {
	open := make(map[int]bool, len(prs))
	for i := range prs {
		open[prs[i].Number] = true
		m.mu.Lock()
		cached, ok := m.files[prs[i].Number]
		m.mu.Unlock()
		if ok && cached.head == prs[i].HeadSHA {
			prs[i].Files = cached.files
			continue
		}
		files, err := changed(ctx, prs[i].Number)
		if err != nil {
			return err
		}
		prs[i].Files = files
		m.mu.Lock()
		m.files[prs[i].Number] = prFiles{head: prs[i].HeadSHA, files: files}
		m.mu.Unlock()
	}
	m.mu.Lock()
	for n := range m.files {
		if !open[n] {
			delete(m.files, n)
		}
	}
	m.mu.Unlock()
	return nil
}

// commentAPI is one forge's calls on pull request comments. Errors are
// already named and typed (see wrap); an edit of a deleted comment fails
// with a 404 answer.
type commentAPI interface {
	// listComments returns page (from 1) of the pull request's comments,
	// oldest first, perPage of them, and the next page (0: none).
	listComments(ctx context.Context, pr, page int) ([]IssueComment, int, error)
	editComment(ctx context.Context, pr int, id int64, body string) error
	createComment(ctx context.Context, pr int, body string) (int64, error)
	// whoAmI asks the forge for the login of the token's account, the
	// author of the comments createComment writes.
	whoAmI(ctx context.Context) (string, error)
}

// upsertComment keeps ferry's one comment for key on pull request pr equal
// to body, through api. It looks for the comment (the first one written by
// the token's account whose body starts with Marker(key), among the pull
// request's first 500 comments) only when this process has not written or
// found it before; then it edits the comment if its body differs, creates
// it if there is none, and sends nothing when the body is already there.
// Anyone who can comment can start a comment with the marker, before ferry
// does: such a comment is not ferry's, and is neither edited nor read (its
// body could make ferry think its own is already there). A comment deleted
// by hand is created again.
func upsertComment(ctx context.Context, api commentAPI, m *memo, count *apiCounters, pr int, key, body string) error {
	if err := checkKey(key); err != nil {
		return failure.Terminal(fmt.Errorf("upsert comment on #%d: %w", pr, err))
	}
	body = frameBody(key, body)
	ck := commentKey{pr: pr, key: key}
	c, known := m.comment(ck)
	if !known {
		self, err := m.login(ctx, api.whoAmI)
		if err != nil {
			return err
		}
		if c, known, err = findComment(ctx, api, pr, self, key); err != nil {
			return err
		}
	}
	if known {
		if c.body == body {
			m.remember(ck, c)
			count.unchanged.Add(1)
			return nil
		}
		err := api.editComment(ctx, pr, c.id, body)
		switch {
		case err == nil:
			m.remember(ck, postedComment{id: c.id, body: body})
			count.edited.Add(1)
			return nil
		case statusCode(err) == http.StatusNotFound:
			// Deleted by hand since: forget it and post it again.
			m.forget(ck)
		default:
			return err
		}
	}
	id, err := api.createComment(ctx, pr, body)
	if err != nil {
		return err
	}
	m.remember(ck, postedComment{id: id, body: body})
	count.created.Add(1)
	return nil
}

// findComment pages through the pull request's comments (oldest first) for
// the first that self wrote and that starts with the marker of key.
func findComment(ctx context.Context, api commentAPI, pr int, self, key string) (postedComment, bool, error) {
	marker := Marker(key)
	found, ok := postedComment{}, false
	err := eachComment(ctx, api, pr, func(c IssueComment) bool {
		if SameLogin(c.Author, self) && strings.HasPrefix(c.Body, marker) {
			found, ok = postedComment{id: c.ID, body: c.Body}, true
			return false
		}
		return true
	})
	return found, ok, err
}

// eachComment calls fn with the pull request's comments, oldest first, up
// to maxCommentPages pages, until fn returns false.
func eachComment(ctx context.Context, api commentAPI, pr int, fn func(IssueComment) bool) error {
	page := 1
	for range maxCommentPages {
		list, next, err := api.listComments(ctx, pr, page)
		if err != nil {
			return err
		}
		for _, c := range list {
			if !fn(c) {
				return nil
			}
		}
		if next == 0 {
			return nil
		}
		page = next
	}
	return nil
}

// allComments lists the pull request's comments (at most maxCommentPages
// pages), oldest first.
func allComments(ctx context.Context, api commentAPI, pr int) ([]IssueComment, error) {
	var all []IssueComment
	err := eachComment(ctx, api, pr, func(c IssueComment) bool {
		all = append(all, c)
		return true
	})
	if err != nil {
		return nil, err
	}
	return all, nil
}
