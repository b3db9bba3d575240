// Gitea (and Forgejo, which keeps Gitea's API) through Gitea's SDK.

package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"code.gitea.io/sdk/gitea"

	"github.com/ferry-dev/ferry/internal/failure"
)

// Gitea is a Forge backed by the REST API (/api/v1) of a Gitea or Forgejo
// server, through Gitea's SDK, for one repository. It behaves as GitHub
// does: one call per operation, errors named and typed the same way
// (failure.Terminal for 4xx answers other than 429; RetryAfter for a 429
// with Retry-After, which a proxy in front of Gitea may send: Gitea itself
// has no rate limit), the same caches. Wrap it in a Coalescer. Safe for
// concurrent use.
type Gitea struct {
	owner, repo string
	baseURL     string
	token       string
	hc          *http.Client
	count       *apiCounters
	memo        *memo
}

// NewGitea returns a client for the repository owner/repo on the Gitea
// server at baseURL (such as https://gitea.example.com; the SDK appends
// /api/v1). token authenticates every request ("Authorization: token …");
// it needs the repository's write scope for comments and statuses. It
// sends nothing: a server that is down fails the first call, not this.
func NewGitea(owner, repo, token, baseURL string) (*Gitea, error) {
	if owner == "" || repo == "" {
		return nil, failure.Terminal(fmt.Errorf("gitea client: owner and repository are required, got %q/%q", owner, repo))
	}
	u, err := url.Parse(baseURL)
	switch {
	case baseURL == "":
		return nil, failure.Terminal(errors.New("gitea client: the server's URL is required"))
	case err != nil:
		return nil, failure.Terminal(fmt.Errorf("gitea client: URL: %w", err))
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return nil, failure.Terminal(fmt.Errorf("gitea client: URL %q: want http(s)://host[:port][/path]", baseURL))
	case u.User != nil:
		// Errors quote request URLs: credentials in one would reach the logs.
		return nil, failure.Terminal(errors.New("gitea client: the URL must not hold credentials; give a token"))
	}
	count := newAPICounters()
	return &Gitea{
		owner:   owner,
		repo:    repo,
		baseURL: strings.TrimSuffix(u.String(), "/"),
		token:   token,
		hc:      &http.Client{Transport: countingTransport{base: http.DefaultTransport, c: count}, Timeout: requestTimeout},
		count:   count,
		memo:    newMemo(),
	}, nil
}

// BaseURL is the API root requests go to, such as http://127.0.0.1:3000/api/v1/.
func (g *Gitea) BaseURL() string { return g.baseURL + "/api/v1/" }

// Stats returns the client's counters since NewGitea.
func (g *Gitea) Stats() Stats { return g.count.stats() }

// api returns an SDK client whose requests carry ctx. The SDK keeps one
// context per client, not per call, so each call gets a client of its own;
// making one sends nothing (the server's version is not asked: ferry uses
// no call younger than Gitea 1.17).
func (g *Gitea) api(ctx context.Context) *gitea.Client {
	c, err := gitea.NewClient(g.baseURL, gitea.SetHTTPClient(g.hc), gitea.SetToken(g.token),
		gitea.SetGiteaVersion(""), gitea.SetContext(ctx))
	if err != nil {
		// None of the options above can fail.
		panic(fmt.Sprintf("gitea client: %v", err))
	}
	return c
}

// fail names the operation and the repository in err, turns an error answer
// into an HTTPError (the SDK keeps only the message), types it (see wrap)
// and counts rate limits.
func (g *Gitea) fail(resp *gitea.Response, err error, format string, args ...any) error {
	if resp != nil && resp.Response != nil && resp.StatusCode >= 300 {
		err = &HTTPError{StatusCode: resp.StatusCode, Header: resp.Header, Message: err.Error()}
	}
	if _, limited := retryAt(err, time.Now(), 0); limited {
		g.count.rateLimited.Add(1)
	}
	return wrap(fmt.Sprintf(format, args...)+" in "+g.owner+"/"+g.repo, err)
}

// PullRequestsForCommit asks Gitea for the pull request whose merge wrote
// sha (commits/{sha}/pull: the merge commit of a merge, the commit of a
// squash, the last commit of a rebase) and, when there is none, lists the
// open pull requests whose head is sha. Unlike GitHub's, Gitea's look-up
// finds neither a commit inside a merged branch nor one below an open pull
// request's head; ApprovingPullRequest then finds nothing, and the approval
// falls back to the commit. Merged pull requests are remembered by commit.
func (g *Gitea) PullRequestsForCommit(ctx context.Context, sha string) ([]PullRequest, error) {
	if sha == "" {
		return nil, failure.Terminal(errors.New("list pull requests for commit: empty sha"))
	}
	if pr, ok := g.memo.mergedCommit(sha); ok {
		return []PullRequest{pr}, nil
	}
	p, resp, err := g.api(ctx).GetCommitPullRequest(g.owner, g.repo, sha)
	switch {
	case err == nil:
		pr := fromGitea(p)
		g.memo.keepMergedCommit(sha, pr)
		return []PullRequest{pr}, nil
	case resp == nil || resp.StatusCode != http.StatusNotFound:
		return nil, g.fail(resp, err, "get the pull request of commit %s", sha)
	}
	open, err := g.openPullRequests(ctx)
	if err != nil {
		return nil, err
	}
	var prs []PullRequest
	for _, pr := range open {
		if pr.HeadSHA == sha {
			prs = append(prs, pr)
		}
	}
	return prs, nil
}

// OpenPullRequests lists the open pull requests with their files. A pull
// request's files are read again only when its head commit moved.
func (g *Gitea) OpenPullRequests(ctx context.Context) ([]PullRequest, error) {
	prs, err := g.openPullRequests(ctx)
	if err != nil {
		return nil, err
	}
	if err := g.memo.withFiles(ctx, prs, g.ChangedFiles); err != nil {
		return nil, err
	}
	return prs, nil
}

func (g *Gitea) openPullRequests(ctx context.Context) ([]PullRequest, error) {
	opts := gitea.ListPullRequestsOptions{State: gitea.StateOpen, ListOptions: gitea.ListOptions{Page: 1, PageSize: perPage}}
	var prs []PullRequest
	for range maxOpenPRPages {
		list, resp, err := g.api(ctx).ListRepoPullRequests(g.owner, g.repo, opts)
		if err != nil {
			return nil, g.fail(resp, err, "list open pull requests")
		}
		for _, p := range list {
			prs = append(prs, fromGitea(p))
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return prs, nil
}

// ChangedFiles lists the paths that pull request number changes; a renamed
// file is listed under its new and its previous path.
func (g *Gitea) ChangedFiles(ctx context.Context, number int) ([]string, error) {
	opts := gitea.ListPullRequestFilesOptions{ListOptions: gitea.ListOptions{Page: 1, PageSize: perPage}}
	var files []string
	for range maxFilePages {
		list, resp, err := g.api(ctx).ListPullRequestFiles(g.owner, g.repo, int64(number), opts)
		if err != nil {
			return nil, g.fail(resp, err, "list files of pull request #%d", number)
		}
		for _, f := range list {
			files = append(files, f.Filename)
			if f.PreviousFilename != "" && f.PreviousFilename != f.Filename {
				files = append(files, f.PreviousFilename)
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return files, nil
}

func fromGitea(p *gitea.PullRequest) PullRequest {
	pr := PullRequest{
		Number: int(p.Index),
		State:  string(p.State),
		Merged: p.HasMerged,
		Title:  p.Title,
		URL:    p.HTMLURL,
	}
	if p.MergedBy != nil {
		pr.MergedBy = p.MergedBy.UserName
	}
	if p.Poster != nil {
		pr.Author = p.Poster.UserName
	}
	var headRepo, baseRepo int64 // a deleted fork leaves no head repository (ID 0)
	if p.Head != nil {
		pr.HeadSHA, headRepo = p.Head.Sha, p.Head.RepoID
	}
	if p.Base != nil {
		pr.BaseRef, baseRepo = p.Base.Ref, p.Base.RepoID
	}
	pr.Fork = headRepo != baseRepo
	if p.MergedCommitID != nil {
		pr.MergeCommitSHA = *p.MergedCommitID
	}
	return pr
}
