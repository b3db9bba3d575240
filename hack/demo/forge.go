package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/reconciler"
	"github.com/ferry-dev/ferry/internal/status/statusfile"
	"github.com/ferry-dev/ferry/internal/testing/fakegithub"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// The forges the demo can host its plans repository on (--forge).
const (
	// forgeGitea is a real Gitea server, the default: ferry talks to it
	// as it would to a team's.
	forgeGitea = "gitea"
	// forgeGitHub is a plain Git server with the GitHub stand-in
	// (internal/testing/fakegithub), an in-process fake of GitHub's API:
	// not GitHub, but it can answer 502 and 403 on cue.
	forgeGitHub = "github"
)

// forgeHost is where a world's plans repository and its pull requests
// live, as the demo's people and checks use them. The world holds one and
// never asks which: everything that differs between a real Gitea and the
// GitHub stand-in is behind these methods.
type forgeHost interface {
	// describe says what runs, for the demo's output.
	describe() string
	// upstream is the host:port the fault proxy stands in front of:
	// Git over HTTP, and the forge's API when it is on the same port.
	upstream() string
	// ferryFlags are the flags of ferry's processes: git reaches the
	// repository (every process), forge the forge's API (`reconciler
	// run` only); proxy is the fault proxy's address, dir where token
	// files go.
	ferryFlags(proxy, dir string) (git, forge []string, err error)
	// remote is how the demo itself reads the repository, not through
	// the proxy.
	remote() gitRemote
	// deliver makes the forge deliver its webhooks to url, signed with
	// secret, from now on.
	deliver(url, secret string)
	// openPR pushes a branch with files by author and opens pull request
	// want (the next number) with title; it returns its number and head.
	openPR(want int, title, author string, files map[string]string) (n int, head string)
	// mergeStyle says how merge merges pull request n, for the output.
	mergeStyle(n int) string
	// merge merges pull request n as by and returns the commit it wrote
	// on main.
	merge(n int, by string) string
	// comments are the bodies of the comments on pull request n, or why
	// the forge did not answer.
	comments(n int) ([]string, error)
	// statuses are the commit statuses on shas (all of them, for the
	// stand-in, which records every one): each context's latest state by
	// "context sha", and every description posted.
	statuses(shas []string) (final map[string]string, texts []string, err error)
	// secrets are the forge's tokens, which must never show.
	secrets() []string
	// repoDir is the plans repository on disk, for the secret scan.
	repoDir() string
	// outage makes the forge fail for d and returns when it works again.
	outage(ctx context.Context, d time.Duration) error
}

var (
	_ forgeHost = (*giteaHost)(nil)
	_ forgeHost = (*githubHost)(nil)
)

// startForge starts the forge of kind with seed as its repository's main
// branch; a forge with a log of its own leaves a copy in logDir.
func startForge(r *testenv.Program, kind, seed, logDir string) (forgeHost, error) {
	switch kind {
	case forgeGitea:
		return startGitea(r, seed, logDir)
	case forgeGitHub:
		return startGitHubStandIn(r, seed), nil
	}
	return nil, fmt.Errorf("unknown forge %q: gitea or github", kind)
}

// gitRemote is how the demo reads the plans repository itself: its URL
// and credentials (none on the plain Git server).
type gitRemote struct {
	url  string
	auth gitsource.Auth
}

// flags are the flags that give ferry's commands the repository.
func (g gitRemote) flags() []string {
	args := []string{"--repo", g.url}
	if g.auth.TokenFile != "" {
		args = append(args, "--git-username", g.auth.Username, "--git-token-file", g.auth.TokenFile)
	}
	return args
}

// store reads the status branch, as `reconciler status` does, through a
// clone under cacheDir.
func (g gitRemote) store(cacheDir string) reconciler.GitStatusStore {
	return reconciler.GitStatusStore{Git: &gitsource.Branch{URL: g.url, Name: statusfile.DefaultBranch, CacheDir: cacheDir, Auth: g.auth}}
}

// goGit is the URL and credentials for a go-git clone.
func (g gitRemote) goGit() (string, transport.AuthMethod, error) {
	clean, auth, _, err := gitsource.Remote(g.url, g.auth)
	return clean, auth, err
}

// mergeStyles are the Gitea merge styles the demo's pull requests take in
// turn: #1 a merge commit, #2 squashed, #3 rebased, #4 a merge commit, …
var mergeStyles = []struct{ style, text string }{
	{testenv.MergeCommit, "with a merge commit"},
	{testenv.MergeSquash, "squashed"},
	{testenv.MergeRebase, "rebased"},
}

// giteaHost is a real Gitea: ferry's account GiteaBot (its token is ferry's
// Git and API token), alice opens the pull requests, bob merges them
// through Gitea's API, and Gitea delivers its own signed webhooks.
type giteaHost struct {
	r         *testenv.Program
	gt        *testenv.Gitea
	tokenFile string
	// up is read-held while the demo acts on Gitea (pushes, opens,
	// merges), and held by an outage while Gitea is down: the demo's
	// people wait for the forge as people would, and an outage never
	// kills Gitea in the middle of one of their calls, which would fail
	// the run for the demo's sake rather than ferry's.
	up sync.RWMutex
}

func startGitea(r *testenv.Program, seed, logDir string) (*giteaHost, error) {
	gt := testenv.StartGitea(r, seed)
	// Gitea's work directory goes at the end: its log stays with
	// ferry's, for a run that failed.
	r.Cleanup(func() {
		if data, err := os.ReadFile(gt.LogFile); err == nil {
			_ = os.WriteFile(filepath.Join(logDir, "gitea.log"), data, 0o644)
		}
	})
	h := &giteaHost{r: r, gt: gt, tokenFile: filepath.Join(r.TempDir(), "gitea-token")}
	// ferry reads its token from a file, as from a mounted Secret.
	if err := os.WriteFile(h.tokenFile, []byte(gt.Token(testenv.GiteaBot)+"\n"), 0o600); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *giteaHost) describe() string {
	return fmt.Sprintf("a real Gitea at %s (ready in %s) with the private repository %s/%s; accounts %s (ferry's, admin), %s and %s (write), %s (read); "+
		"pull requests merged in turn with a merge commit, squashed, rebased; its log: %s (copied to the log directory at the end)",
		h.gt.URL, h.gt.StartupTime.Round(100*time.Millisecond), h.gt.Owner, h.gt.Repo,
		testenv.GiteaBot, testenv.GiteaMaintainer, testenv.GiteaReviewer, testenv.GiteaReader, h.gt.LogFile)
}

func (h *giteaHost) upstream() string { return strings.TrimPrefix(h.gt.URL, "http://") }

// ferryFlags: Git and the API are on Gitea's one HTTP port, so both go
// through the proxy, with the bot's token for both.
func (h *giteaHost) ferryFlags(proxy, _ string) (git, forge []string, err error) {
	base := "http://" + proxy
	git = []string{"--repo", base + "/" + h.gt.Owner + "/" + h.gt.Repo + ".git",
		"--git-username", testenv.GiteaBot, "--git-token-file", h.tokenFile}
	forge = []string{"--forge", forgeGitea, "--forge-url", base, "--forge-repo", h.gt.Owner + "/" + h.gt.Repo,
		"--forge-token-file", h.tokenFile}
	return git, forge, nil
}

func (h *giteaHost) remote() gitRemote {
	return gitRemote{url: h.gt.RepoURL(), auth: gitsource.Auth{Username: testenv.GiteaBot, TokenFile: h.tokenFile}}
}

func (h *giteaHost) deliver(url, secret string) { h.gt.AddWebhook(h.r, url, secret) }

// openPR: alice pushes branch pr-<want> and opens the pull request.
// Gitea numbers pull requests on from the repository's last issue or
// pull request, which the demo alone opens: n is want.
func (h *giteaHost) openPR(want int, title, author string, files map[string]string) (int, string) {
	h.up.RLock()
	defer h.up.RUnlock()
	branch := fmt.Sprintf("pr-%d", want)
	head := h.gt.PushBranch(h.r, author, branch, title, files)
	return h.gt.OpenPullRequest(h.r, author, branch, title), head
}

func (h *giteaHost) style(n int) int { return (n - 1) % len(mergeStyles) }

func (h *giteaHost) mergeStyle(n int) string { return mergeStyles[h.style(n)].text }

func (h *giteaHost) merge(n int, by string) string {
	h.up.RLock()
	defer h.up.RUnlock()
	return h.gt.MergePullRequest(h.r, by, n, mergeStyles[h.style(n)].style)
}

func (h *giteaHost) repoPath(p string) string { return "/repos/" + h.gt.Owner + "/" + h.gt.Repo + p }

// comments reads them as ferry's account: the repository is private.
func (h *giteaHost) comments(n int) ([]string, error) {
	var cs []testenv.GiteaComment
	if err := h.gt.TryAPI(testenv.GiteaBot, http.MethodGet, h.repoPath(fmt.Sprintf("/issues/%d/comments", n)), nil, &cs); err != nil {
		return nil, err
	}
	bodies := make([]string, len(cs))
	for i, c := range cs {
		bodies[i] = c.Body
	}
	return bodies, nil
}

// statuses reads each commit's combined status (the latest of each
// context) and every status posted on it (for their descriptions).
func (h *giteaHost) statuses(shas []string) (map[string]string, []string, error) {
	final := map[string]string{}
	var texts []string
	for _, sha := range shas {
		var combined struct {
			Statuses []testenv.GiteaStatus `json:"statuses"`
		}
		if err := h.gt.TryAPI(testenv.GiteaBot, http.MethodGet, h.repoPath("/commits/"+sha+"/status"), nil, &combined); err != nil {
			return nil, nil, err
		}
		for _, s := range combined.Statuses {
			final[s.Context+" "+sha] = s.Status
		}
		var all []testenv.GiteaStatus
		if err := h.gt.TryAPI(testenv.GiteaBot, http.MethodGet, h.repoPath("/commits/"+sha+"/statuses?limit=50"), nil, &all); err != nil {
			return nil, nil, err
		}
		for _, s := range all {
			texts = append(texts, s.Description, s.TargetURL)
		}
	}
	return final, texts, nil
}

// secrets are every account's token: ferry's, and the people's, which
// ferry never sees but which must not show either.
func (h *giteaHost) secrets() []string {
	var out []string
	for _, login := range []string{testenv.GiteaBot, testenv.GiteaMaintainer, testenv.GiteaReviewer, testenv.GiteaReader} {
		out = append(out, h.gt.Token(login))
	}
	return out
}

// repoDir is the bare repository in Gitea's work directory (Gitea keeps
// owner and repository names in lower case on disk).
func (h *giteaHost) repoDir() string {
	return filepath.Join(h.gt.Dir, "repositories", strings.ToLower(h.gt.Owner), strings.ToLower(h.gt.Repo)+".git")
}

// outage kills Gitea with SIGKILL (Stop does: a forge that dies, not one
// that shuts down), keeps it down for d and starts it again on the same
// port with its data. The demo's people wait meanwhile (up).
func (h *giteaHost) outage(ctx context.Context, d time.Duration) error {
	h.up.Lock()
	defer h.up.Unlock()
	h.gt.Stop()
	sleep(ctx, d)
	// Start fails the program (runtime.Goexit) when Gitea does not come
	// back; this goroutine must still return for the run to end.
	started := false
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.gt.Start(h.r)
		started = true
	}()
	<-done
	if !started {
		return errors.New("gitea did not start again; its log: " + h.gt.LogFile)
	}
	return nil
}

// githubHost is a plain Git server with the plans repository and the
// GitHub stand-in for the pull requests, comments and statuses; the
// demo delivers the webhooks GitHub would (testenv.PlansRepo).
type githubHost struct {
	r    *testenv.Program
	git  *testenv.Git
	gh   *fakegithub.Server
	repo *testenv.PlansRepo
}

func startGitHubStandIn(r *testenv.Program, seed string) *githubHost {
	h := &githubHost{r: r, git: testenv.StartGit(r, seed), gh: fakegithub.New("acme", "migrations", "demo-token")}
	r.Cleanup(h.gh.Close)
	return h
}

func (h *githubHost) describe() string {
	return "a plain Git server with the plans repository and the GitHub stand-in (internal/testing/fakegithub: an in-process fake of GitHub's API, not GitHub)"
}

func (h *githubHost) upstream() string {
	u, err := url.Parse(h.git.BaseURL)
	if err != nil {
		return h.git.BaseURL
	}
	return u.Host
}

// ferryFlags: only Git goes through the proxy; the stand-in's API is
// reached directly (its own Outage is its fault).
func (h *githubHost) ferryFlags(proxy, dir string) (git, forge []string, err error) {
	token := filepath.Join(dir, "github-token")
	if err := os.WriteFile(token, []byte(h.gh.Token), 0o600); err != nil {
		return nil, nil, err
	}
	git = []string{"--repo", "http://" + proxy + "/plans.git"}
	forge = []string{"--forge", forgeGitHub, "--forge-url", h.gh.URL, "--forge-repo", "acme/migrations", "--forge-token-file", token}
	return git, forge, nil
}

func (h *githubHost) remote() gitRemote { return gitRemote{url: h.git.URL} }

func (h *githubHost) deliver(url, secret string) {
	h.repo = testenv.NewPlansRepo(h.r, h.git, h.gh)
	h.repo.WebhookURL, h.repo.WebhookSecret = url, []byte(secret)
	h.repo.Undelivered = func(event string, err error) {
		h.r.Logf("the stand-in's %s webhook was not delivered (%v): like GitHub, the demo does not retry it; the reconciler's poll finds the change", event, err)
	}
}

func (h *githubHost) openPR(want int, title, author string, files map[string]string) (int, string) {
	return want, h.repo.OpenPR(want, title, author, files)
}

func (h *githubHost) mergeStyle(int) string { return "with a merge commit" }

func (h *githubHost) merge(n int, by string) string { return h.repo.MergePR(n, by) }

func (h *githubHost) comments(n int) ([]string, error) {
	var bodies []string
	for _, c := range h.gh.Comments(n) {
		bodies = append(bodies, c.Body)
	}
	return bodies, nil
}

func (h *githubHost) statuses([]string) (map[string]string, []string, error) {
	final := map[string]string{}
	var texts []string
	for _, s := range h.gh.Statuses() {
		final[s.Context+" "+s.SHA] = s.State
		texts = append(texts, s.Description)
	}
	return final, texts, nil
}

func (h *githubHost) secrets() []string { return []string{h.gh.Token} }

func (h *githubHost) repoDir() string { return h.git.Dir }

// outage: the stand-in answers 502, then 403 secondary rate limit, for d.
func (h *githubHost) outage(ctx context.Context, d time.Duration) error {
	sleep(ctx, time.Until(h.gh.Outage(d)))
	return nil
}
