package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/secretfile"
)

// The environment variables ReadToken falls back to: TokenEnv for GitHub,
// GiteaTokenEnv for Gitea.
const (
	TokenEnv      = "GITHUB_TOKEN"
	GiteaTokenEnv = "GITEA_TOKEN"
)

// Limits on how far the client pages through lists, so that one call cannot
// spend a large share of the hourly rate limit.
const (
	perPage          = 100
	maxCommentPages  = 5  // ferry comments early; 500 comments is a busy PR
	maxOpenPRPages   = 10 // 1,000 open pull requests
	maxFilePages     = 30 // GitHub lists at most 3,000 files of a pull request
	maxMergedEntries = 1024
)

// requestTimeout bounds one API request when the caller's context does not.
const requestTimeout = 30 * time.Second

// TokenFromFile reads a GitHub token: ReadToken(path, TokenEnv).
func TokenFromFile(path string) (string, error) { return ReadToken(path, TokenEnv) }

// ReadToken reads a forge's API token from path, trimming surrounding white
// space (a trailing newline is the usual case), or from the environment
// variable env when path is empty. Errors name the file or variable, never
// the token.
func ReadToken(path, env string) (string, error) {
	if path == "" {
		tok := strings.TrimSpace(os.Getenv(env))
		if tok == "" {
			return "", fmt.Errorf("read forge token: no token file given and $%s is empty", env)
		}
		return tok, nil
	}
	tok, err := secretfile.Read(path)
	if err != nil {
		return "", fmt.Errorf("read forge token: %w", err)
	}
	return tok, nil
}

// GitHub is a Forge backed by the GitHub REST API through go-github, for one
// repository on github.com or on a GitHub Enterprise Server. Each operation
// makes its calls once and returns the error: errors that retrying cannot fix
// are failure.Terminal, rate limits are recognised by RetryAfter. Wrap it in
// a Coalescer for retries and to spare the rate limit. Safe for concurrent
// use, but two concurrent UpsertComment calls for the same pull request and
// key may both create a comment; the Coalescer serialises them.
type GitHub struct {
	owner, repo string
	client      *github.Client
	count       *apiCounters
	memo        *memo
}

// New returns a client for the repository owner/repo. token authenticates
// every request as a Bearer token (a personal access token, or an
// installation token of a GitHub App); empty sends none, which only reads
// public repositories. apiURL empty means api.github.com; otherwise it is a
// GitHub Enterprise Server's URL, such as https://github.example.com, to which
// go-github appends /api/v3/ (and /api/uploads/ for uploads).
func New(owner, repo, token, apiURL string) (*GitHub, error) {
	if owner == "" || repo == "" {
		return nil, failure.Terminal(fmt.Errorf("github client: owner and repository are required, got %q/%q", owner, repo))
	}
	count := newAPICounters()
	hc := &http.Client{
		Transport: countingTransport{base: http.DefaultTransport, c: count},
		Timeout:   requestTimeout,
	}
	client := github.NewClient(hc)
	if token != "" {
		client = client.WithAuthToken(token)
	}
	if apiURL != "" {
		var err error
		if client, err = client.WithEnterpriseURLs(apiURL, apiURL); err != nil {
			return nil, failure.Terminal(fmt.Errorf("github client: API URL: %w", err))
		}
	}
	return &GitHub{
		owner:  owner,
		repo:   repo,
		client: client,
		count:  count,
		memo:   newMemo(),
	}, nil
}

// BaseURL is the API root requests go to, such as https://api.github.com/.
func (g *GitHub) BaseURL() string { return g.client.BaseURL.String() }

// Stats returns the client's counters since New.
func (g *GitHub) Stats() Stats { return g.count.stats() }

// fail names the operation and the repository in err, types it (see wrap)
// and counts rate limits.
func (g *GitHub) fail(err error, format string, args ...any) error {
	if _, limited := retryAt(err, time.Now(), 0); limited {
		g.count.rateLimited.Add(1)
	}
	return wrap(fmt.Sprintf(format, args...)+" in "+g.owner+"/"+g.repo, err)
}

// PullRequestsForCommit lists the pull requests associated with sha (one
// page of 100: a commit is rarely in more) and, for each merged one, reads
// the pull request itself, because the list omits merged_by. Merged pull
// requests are remembered, so asking again for the same commit costs one
// call.
func (g *GitHub) PullRequestsForCommit(ctx context.Context, sha string) ([]PullRequest, error) {
	if sha == "" {
		return nil, failure.Terminal(errors.New("list pull requests for commit: empty sha"))
	}
	list, _, err := g.client.PullRequests.ListPullRequestsWithCommit(ctx, g.owner, g.repo, sha, &github.ListOptions{PerPage: perPage})
	if err != nil {
		return nil, g.fail(err, "list pull requests for commit %s", sha)
	}
	prs := make([]PullRequest, 0, len(list))
	for _, p := range list {
		pr := fromGitHub(p)
		if p.MergedAt != nil {
			if pr, err = g.mergedPullRequest(ctx, pr.Number); err != nil {
				return nil, err
			}
		}
		prs = append(prs, pr)
	}
	return prs, nil
}

// mergedPullRequest reads the pull request number in full, for merged and
// merged_by, and remembers it.
func (g *GitHub) mergedPullRequest(ctx context.Context, number int) (PullRequest, error) {
	if pr, ok := g.memo.mergedPR(number); ok {
		return pr, nil
	}
	p, _, err := g.client.PullRequests.Get(ctx, g.owner, g.repo, number)
	if err != nil {
		return PullRequest{}, g.fail(err, "get pull request #%d", number)
	}
	pr := fromGitHub(p)
	g.memo.keepMerged(pr)
	return pr, nil
}

// OpenPullRequests lists the open pull requests with their files. A pull
// request's files are read again only when its head commit moved, so a poll
// that finds nothing new costs one call per 100 open pull requests.
func (g *GitHub) OpenPullRequests(ctx context.Context) ([]PullRequest, error) {
	opts := &github.PullRequestListOptions{State: "open", ListOptions: github.ListOptions{PerPage: perPage}}
	var prs []PullRequest
	for page := 0; page < maxOpenPRPages; page++ {
		list, resp, err := g.client.PullRequests.List(ctx, g.owner, g.repo, opts)
		if err != nil {
			return nil, g.fail(err, "list open pull requests")
		}
		for _, p := range list {
			prs = append(prs, fromGitHub(p))
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	if err := g.memo.withFiles(ctx, prs, g.ChangedFiles); err != nil {
		return nil, err
	}
	return prs, nil
}

// ChangedFiles lists the paths that pull request number changes; a renamed
// file is listed under its new and its previous path, since both name a
// plan the pull request affects.
func (g *GitHub) ChangedFiles(ctx context.Context, number int) ([]string, error) {
	opts := &github.ListOptions{PerPage: perPage}
	var files []string
	for page := 0; page < maxFilePages; page++ {
		list, resp, err := g.client.PullRequests.ListFiles(ctx, g.owner, g.repo, number, opts)
		if err != nil {
			return nil, g.fail(err, "list files of pull request #%d", number)
		}
		for _, f := range list {
			files = append(files, f.GetFilename())
			if prev := f.GetPreviousFilename(); prev != "" {
				files = append(files, prev)
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return files, nil
}

func fromGitHub(p *github.PullRequest) PullRequest {
	return PullRequest{
		Number:         p.GetNumber(),
		State:          p.GetState(),
		Merged:         p.GetMerged(),
		MergedBy:       p.GetMergedBy().GetLogin(),
		HeadSHA:        p.GetHead().GetSHA(),
		BaseRef:        p.GetBase().GetRef(),
		MergeCommitSHA: p.GetMergeCommitSHA(),
		Title:          p.GetTitle(),
		URL:            p.GetHTMLURL(),
		Author:         p.GetUser().GetLogin(),
		// A deleted fork leaves no head repository (ID 0).
		Fork: p.GetHead().GetRepo().GetID() != p.GetBase().GetRepo().GetID(),
	}
}
