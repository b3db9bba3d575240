// Gitea's REST API as the people of a test use it: open, merge and comment
// on pull requests, add webhooks, read statuses back.

package testenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// API sends one request to Gitea's API (path under /api/v1) as login, with
// in as its JSON body (none when nil), decodes the answer into out (unless
// nil) and returns the status. An answer other than 2xx fails the test.
func (g *Gitea) API(t T, login, method, path string, in, out any) int {
	t.Helper()
	code, body, err := g.call(login, method, path, in)
	if err != nil {
		t.Fatalf("testenv: gitea %s %s as %s: %v", method, path, login, err)
	}
	if code/100 != 2 {
		t.Fatalf("testenv: gitea %s %s as %s: %d %s", method, path, login, code, body)
	}
	if out != nil && len(body) > 0 {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("testenv: gitea %s %s: decode: %v", method, path, err)
		}
	}
	return code
}

// call sends a request and returns the status and the body.
func (g *Gitea) call(login, method, path string, in any) (int, []byte, error) {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return 0, nil, err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, g.URL+"/api/v1"+path, body)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "token "+g.tokens[login])
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// GiteaPR is the part of a pull request that tests read back.
type GiteaPR struct {
	Number         int     `json:"number"`
	State          string  `json:"state"`
	Merged         bool    `json:"merged"`
	MergeCommitSHA *string `json:"merge_commit_sha"`
	MergedBy       *struct {
		Login string `json:"login"`
	} `json:"merged_by"`
	Head struct {
		Ref string `json:"ref"`
		SHA string `json:"sha"`
	} `json:"head"`
}

// OpenPullRequest opens a pull request from branch head into main as login
// and returns its number.
func (g *Gitea) OpenPullRequest(t T, login, head, title string) int {
	t.Helper()
	return g.OpenPullRequestInto(t, login, head, "main", title)
}

// OpenPullRequestInto opens a pull request from branch head into branch
// base as login and returns its number.
func (g *Gitea) OpenPullRequestInto(t T, login, head, base, title string) int {
	t.Helper()
	var pr GiteaPR
	g.API(t, login, http.MethodPost, g.repoPath("/pulls"), map[string]any{"head": head, "base": base, "title": title}, &pr)
	return pr.Number
}

// Review reviews pull request number as login: event is "APPROVED",
// "REQUEST_CHANGES" or "COMMENT", on the pull request's head.
func (g *Gitea) Review(t T, login string, number int, event string) {
	t.Helper()
	g.API(t, login, http.MethodPost, g.repoPath(fmt.Sprintf("/pulls/%d/reviews", number)), map[string]any{"event": event, "body": "Reviewed by " + login + "."}, nil)
}

// PullRequest reads pull request number back.
func (g *Gitea) PullRequest(t T, number int) GiteaPR {
	t.Helper()
	var pr GiteaPR
	g.API(t, GiteaBot, http.MethodGet, g.repoPath(fmt.Sprintf("/pulls/%d", number)), nil, &pr)
	return pr
}

// Merge styles of MergePullRequest, as Gitea names them.
const (
	MergeCommit = "merge"
	MergeSquash = "squash"
	MergeRebase = "rebase"
)

// MergePullRequest merges pull request number as login with style
// (MergeCommit, MergeSquash, MergeRebase) through Gitea's API and returns
// the commit the merge wrote on main. Gitea checks a new pull request's
// mergeability in the background and refuses to merge until it has: the
// merge is tried again for up to two minutes while Gitea says so (its
// check queue took more than 30 seconds on a loaded 2-core machine).
func (g *Gitea) MergePullRequest(t T, login string, number int, style string) string {
	t.Helper()
	path := g.repoPath(fmt.Sprintf("/pulls/%d/merge", number))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		code, body, err := g.call(login, http.MethodPost, path, map[string]any{"Do": style, "delete_branch_after_merge": false})
		if err != nil {
			t.Fatalf("testenv: merge #%d as %s: %v", number, login, err)
		}
		if code/100 == 2 {
			break
		}
		retry := code == http.StatusMethodNotAllowed && strings.Contains(strings.ToLower(string(body)), "try again")
		if !retry || time.Now().After(deadline) {
			t.Fatalf("testenv: merge #%d (%s) as %s: %d %s", number, style, login, code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	pr := g.PullRequest(t, number)
	if !pr.Merged || pr.MergeCommitSHA == nil {
		t.Fatalf("testenv: #%d not merged after its merge: %+v", number, pr)
	}
	return *pr.MergeCommitSHA
}

// Comment writes body on pull request (or issue) number as login and
// returns the comment's ID.
func (g *Gitea) Comment(t T, login string, number int, body string) int64 {
	t.Helper()
	var c struct {
		ID int64 `json:"id"`
	}
	g.API(t, login, http.MethodPost, g.repoPath(fmt.Sprintf("/issues/%d/comments", number)), map[string]any{"body": body}, &c)
	return c.ID
}

// GiteaComment is a comment as Gitea shows it.
type GiteaComment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
	User struct {
		Login string `json:"login"`
	} `json:"user"`
}

// Comments reads the comments on pull request number back.
func (g *Gitea) Comments(t T, number int) []GiteaComment {
	t.Helper()
	var cs []GiteaComment
	g.API(t, GiteaBot, http.MethodGet, g.repoPath(fmt.Sprintf("/issues/%d/comments", number)), nil, &cs)
	return cs
}

// GiteaStatus is a commit status as Gitea shows it: the state is in the
// field "status" (GitHub names it "state").
type GiteaStatus struct {
	Context     string `json:"context"`
	Status      string `json:"status"`
	Description string `json:"description"`
	TargetURL   string `json:"target_url"`
}

// Statuses reads back the latest commit status of each context on sha
// (Gitea's combined status).
func (g *Gitea) Statuses(t T, sha string) []GiteaStatus {
	t.Helper()
	var combined struct {
		Statuses []GiteaStatus `json:"statuses"`
	}
	g.API(t, GiteaBot, http.MethodGet, g.repoPath("/commits/"+sha+"/status"), nil, &combined)
	return combined.Statuses
}

// AddWebhook makes Gitea deliver the repository's push, pull_request (with
// its comments and synchronisations) and issue_comment events to url,
// signed with secret, and returns the hook's ID.
func (g *Gitea) AddWebhook(t T, url, secret string) int64 {
	t.Helper()
	var h struct {
		ID int64 `json:"id"`
	}
	g.API(t, GiteaBot, http.MethodPost, g.repoPath("/hooks"), map[string]any{
		"type":   "gitea",
		"active": true,
		"events": []string{"push", "pull_request", "issue_comment"},
		"config": map[string]string{"url": url, "content_type": "json", "secret": secret},
	}, &h)
	return h.ID
}

// TryAPI is API for a caller that carries on when Gitea does not answer
// (the demo reads comments while a fault has killed the forge): no answer,
// or one other than 2xx, is an error to return rather than a failed test.
func (g *Gitea) TryAPI(login, method, path string, in, out any) error {
	code, body, err := g.call(login, method, path, in)
	if err != nil {
		return fmt.Errorf("gitea %s %s: %w", method, path, err)
	}
	if code/100 != 2 {
		return fmt.Errorf("gitea %s %s: %d %s", method, path, code, body)
	}
	if out != nil && len(body) > 0 {
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("gitea %s %s: decode: %w", method, path, err)
		}
	}
	return nil
}
