package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// The accounts StartGitea creates, and the repository.
const (
	// GiteaBot is a site admin, owner of the organization: ferry's account,
	// whose token ferry uses.
	GiteaBot = "ferry"
	// GiteaMaintainer has write access to the repository: she pushes
	// branches, opens and merges pull requests.
	GiteaMaintainer = "alice"
	// GiteaReviewer has write access too: a second person to merge.
	GiteaReviewer = "bob"
	// GiteaReader has read access only: she can comment, not merge.
	GiteaReader = "mallory"
	// GiteaOwner and GiteaRepo name the plans repository (private).
	GiteaOwner = "acme"
	GiteaRepo  = "plans"
)

// Gitea is a real Gitea server (the binary `make tools` builds) with its own
// work directory and sqlite database, four accounts with tokens
// (GiteaBot, GiteaMaintainer, GiteaReviewer, GiteaReader) and a private repository
// GiteaOwner/GiteaRepo whose main branch holds the seed files.
type Gitea struct {
	// URL is the server's root, such as http://127.0.0.1:20001, without a
	// trailing slash: forge.NewGitea's base URL.
	URL string
	// Owner and Repo name the plans repository.
	Owner, Repo string
	// Dir is the server's work directory; LogFile its output.
	Dir, LogFile string
	// StartupTime is how long StartGitea took, from the first command to
	// the seeded repository.
	StartupTime time.Duration

	bin, config, custom string
	tokens              map[string]string // login -> API token
	passwords           map[string]string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartGitea runs `gitea web` on a free loopback port with a work
// directory of its own, creates the accounts, their tokens and the
// repository, and pushes the files under seed (a README when seed is
// empty) to its main branch as GiteaBot. Everything goes when t ends. The
// binary and the templates come from $FERRY_GITEA_DIR or `hack/tools.sh
// --gitea-dir`; when they are missing the test fails and says to run
// `make tools`. A *Program is a T: the demo starts it the same way.
func StartGitea(t T, seed string) *Gitea {
	t.Helper()
	return StartGiteaOn(t, seed, "127.0.0.1")
}

// StartGiteaOn is StartGitea listening on ip, e.g. a Network's HostIP,
// where pods on real nodes reach it.
func StartGiteaOn(t T, seed, ip string) *Gitea {
	t.Helper()
	start := time.Now()
	dir, err := toolsScriptDir("FERRY_GITEA_DIR", "--gitea-dir")
	if err != nil {
		t.Fatalf("testenv: find gitea: %v", err)
	}
	bin := filepath.Join(dir, "gitea")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("testenv: gitea not found in %s: run `make tools` (`make test` builds it when missing)", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "src", "templates")); err != nil {
		t.Fatalf("testenv: Gitea's templates not found under %s/src: run `make tools`", dir)
	}
	work, err := filepath.Abs(t.TempDir())
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	addr := freeAddrOn(t, ip)
	g := giteaIn(bin, work)
	g.URL, g.Owner, g.Repo = "http://"+addr, GiteaOwner, GiteaRepo
	if err := writeGiteaConfig(g.config, work, filepath.Join(dir, "src"), addr); err != nil {
		t.Fatalf("testenv: gitea: %v", err)
	}
	if err := g.fromTemplate(t, filepath.Join(dir, "src")); err != nil {
		t.Fatalf("testenv: gitea: %v", err)
	}
	t.Cleanup(func() {
		g.Stop()
		if failed, ok := t.(interface{ Failed() bool }); ok && failed.Failed() {
			t.Logf("testenv: gitea's log, %s:\n%s", g.LogFile, tail(g.LogFile, 40))
		}
	})
	g.Start(t)
	g.API(t, GiteaBot, http.MethodPost, "/orgs", map[string]any{"username": GiteaOwner}, nil)
	g.API(t, GiteaBot, http.MethodPost, "/orgs/"+GiteaOwner+"/repos",
		map[string]any{"name": GiteaRepo, "private": true, "default_branch": "main"}, nil)
	for login, perm := range map[string]string{GiteaMaintainer: "write", GiteaReviewer: "write", GiteaReader: "read"} {
		g.API(t, GiteaBot, http.MethodPut, g.repoPath("/collaborators/"+login), map[string]any{"permission": perm}, nil)
	}
	g.seed(t, seed)
	g.StartupTime = time.Since(start)
	t.Logf("testenv: Gitea %s ready in %s (work directory %s)", g.URL, g.StartupTime.Round(time.Millisecond), work)
	return g
}

// giteaIn is a Gitea of bin with its work directory, configuration and
// log laid out under work, not yet configured or started.
func giteaIn(bin, work string) *Gitea {
	return &Gitea{
		Dir: work, LogFile: filepath.Join(work, "gitea.log"),
		bin: bin, config: filepath.Join(work, "custom", "conf", "app.ini"), custom: filepath.Join(work, "custom"),
		tokens: map[string]string{}, passwords: map[string]string{},
	}
}

// giteaTemplate is what `gitea migrate` and the accounts' creation leave
// in a server's data directory, made once per process: each of the nine
// commands loads all of Gitea and opens its database (about 3 s of CPU
// per server), and every server of a process can start from the same
// files. The accounts' passwords and tokens are stored hashed and
// salted, independent of a server's secrets, so each copy accepts them.
var giteaTemplate struct {
	sync.Mutex
	bin               string
	files             map[string][]byte // data/ file -> content
	passwords, tokens map[string]string
}

// fromTemplate gives g the template's database, making the template
// first when this process has none for g's binary.
func (g *Gitea) fromTemplate(t T, static string) error {
	t.Helper()
	tm := &giteaTemplate
	tm.Lock()
	defer tm.Unlock()
	if tm.bin != g.bin {
		if err := makeGiteaTemplate(t, g.bin, static); err != nil {
			return err
		}
	}
	data := filepath.Join(g.Dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	for name, content := range tm.files {
		if err := os.WriteFile(filepath.Join(data, name), content, 0o600); err != nil {
			return err
		}
	}
	maps.Copy(g.passwords, tm.passwords)
	maps.Copy(g.tokens, tm.tokens)
	return nil
}

// makeGiteaTemplate runs the migration and creates the accounts and their
// tokens in a work directory of its own, with a test server's settings, and
// keeps the files of its data directory (the sqlite database) in
// giteaTemplate.
func makeGiteaTemplate(t T, bin, static string) error {
	t.Helper()
	work, err := os.MkdirTemp("", "ferry-gitea-template-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	g := giteaIn(bin, work)
	// The address is not used: no command here serves.
	if err := writeGiteaConfig(g.config, work, static, "127.0.0.1:1"); err != nil {
		return err
	}
	g.run(t, "migrate")
	for _, u := range []struct {
		login string
		admin bool
	}{{GiteaBot, true}, {GiteaMaintainer, false}, {GiteaReviewer, false}, {GiteaReader, false}} {
		g.passwords[u.login] = "pw-" + randomHex(8)
		args := []string{"admin", "user", "create", "--username", u.login, "--password", g.passwords[u.login],
			"--email", u.login + "@ferry.invalid", "--must-change-password=false"}
		if u.admin {
			args = append(args, "--admin")
		}
		g.run(t, args...)
		out := g.run(t, "admin", "user", "generate-access-token", "--username", u.login,
			"--token-name", "ferry-test", "--scopes", "all", "--raw")
		// The token is the last line: Gitea warns about root before it.
		g.tokens[u.login] = out[strings.LastIndexByte(out, '\n')+1:]
	}
	entries, err := os.ReadDir(filepath.Join(work, "data"))
	if err != nil {
		return err
	}
	files := map[string][]byte{}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if files[e.Name()], err = os.ReadFile(filepath.Join(work, "data", e.Name())); err != nil {
			return err
		}
	}
	if files["gitea.db"] == nil {
		return fmt.Errorf("template: no gitea.db in %s/data after the migration", work)
	}
	tm := &giteaTemplate
	tm.bin, tm.files, tm.passwords, tm.tokens = bin, files, g.passwords, g.tokens
	return nil
}

// writeGiteaConfig writes the app.ini of a test server: sqlite, no
// mailer, no SSH, offline, in-memory queues and caches, no cron, and
// webhooks allowed to loopback addresses (the receivers under test).
func writeGiteaConfig(path, work, static, addr string) error {
	host, port, _ := strings.Cut(addr, ":")
	ini := fmt.Sprintf(`APP_NAME = ferry test
RUN_MODE = prod
WORK_PATH = %[1]s
I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true

[server]
PROTOCOL = http
HTTP_ADDR = %[2]s
HTTP_PORT = %[3]s
DOMAIN = %[2]s
ROOT_URL = http://%[2]s:%[3]s/
APP_DATA_PATH = %[1]s/data
STATIC_ROOT_PATH = %[4]s
DISABLE_SSH = true
START_SSH_SERVER = false
OFFLINE_MODE = true
LFS_START_SERVER = false

[database]
DB_TYPE = sqlite3
PATH = %[1]s/data/gitea.db
SQLITE_JOURNAL_MODE = WAL

[repository]
ROOT = %[1]s/repositories
DEFAULT_BRANCH = main

[security]
INSTALL_LOCK = true
SECRET_KEY = %[5]s
INTERNAL_TOKEN = %[6]s
PASSWORD_HASH_ALGO = pbkdf2_hi

[oauth2]
; Gitea reads API tokens through its OAuth2 method: disabling OAuth2
; refuses every token.
JWT_SECRET = %[7]s

[service]
DISABLE_REGISTRATION = true
REQUIRE_SIGNIN_VIEW = true
DEFAULT_ALLOW_CREATE_ORGANIZATION = true

[mailer]
ENABLED = false

[webhook]
ALLOWED_HOST_LIST = *
DELIVER_TIMEOUT = 5
SKIP_TLS_VERIFY = true

[queue]
TYPE = channel

[cache]
ADAPTER = memory

[session]
PROVIDER = memory

[indexer]
ISSUE_INDEXER_TYPE = db
REPO_INDEXER_ENABLED = false

[cron]
ENABLED = false

[cron.update_checker]
ENABLED = false

[actions]
ENABLED = false

[picture]
DISABLE_GRAVATAR = true

[log]
MODE = console
LEVEL = Warn
`, work, host, port, static, randomHex(32), randomHex(32), randomHex(32))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(ini), 0o600)
}

// run runs one gitea command on the server's configuration and returns its
// output, trimmed.
func (g *Gitea) run(t T, args ...string) string {
	t.Helper()
	cmd := exec.Command(g.bin, append(args, g.pathFlags()...)...)
	cmd.Env = g.env()
	cmd.Dir = g.Dir
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		// The arguments may hold a password: name the command only.
		t.Fatalf("testenv: gitea %s: %v: %s%s", strings.Join(args[:min(3, len(args))], " "), err, out, stderr)
	}
	return strings.TrimSpace(string(out))
}

func (g *Gitea) pathFlags() []string {
	return []string{"--config", g.config, "--custom-path", g.custom, "--work-path", g.Dir}
}

func (g *Gitea) env() []string {
	return append(os.Environ(), "HOME="+g.Dir, "GITEA_WORK_DIR="+g.Dir, "USER=root",
		"GIT_CONFIG_NOSYSTEM=1")
}

// Start starts `gitea web` and waits until its API answers. StartGitea
// calls it; call it again after Stop, to bring a killed forge back with
// its data.
func (g *Gitea) Start(t T) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cmd != nil {
		t.Fatalf("testenv: gitea is already running")
	}
	log, err := os.OpenFile(g.LogFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	cmd := exec.Command(g.bin, append([]string{"web"}, g.pathFlags()...)...)
	cmd.Env, cmd.Dir = g.env(), g.Dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		t.Fatalf("testenv: start gitea: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(exited) }()
	g.cmd, g.exited = cmd, exited

	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case <-exited:
			g.cmd = nil
			t.Fatalf("testenv: gitea exited at start:\n%s", tail(g.LogFile, 30))
		default:
		}
		resp, err := http.Get(g.URL + "/api/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: gitea at %s not ready within a minute:\n%s", g.URL, tail(g.LogFile, 30))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the server (SIGKILL: a forge that dies) and waits for it to
// exit. Its data stay, for Start.
func (g *Gitea) Stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cmd == nil {
		return
	}
	_ = syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
	<-g.exited
	g.cmd = nil
}

// Token is the API token of login (GiteaBot, GiteaMaintainer,
// GiteaReader), with every scope.
func (g *Gitea) Token(login string) string { return g.tokens[login] }

// RepoURL is the repository's clone URL, without credentials.
func (g *Gitea) RepoURL() string { return g.URL + "/" + g.Owner + "/" + g.Repo + ".git" }

// CloneURL is the repository's clone URL with login's token in it, for git
// on the command line. Never log it.
func (g *Gitea) CloneURL(login string) string {
	return strings.Replace(g.RepoURL(), "://", "://"+login+":"+g.tokens[login]+"@", 1)
}

// Auth is login's credentials for go-git.
func (g *Gitea) Auth(login string) *githttp.BasicAuth {
	return &githttp.BasicAuth{Username: login, Password: g.tokens[login]}
}

func (g *Gitea) repoPath(p string) string { return "/repos/" + g.Owner + "/" + g.Repo + p }

// seed pushes the files under seed (a README when empty) as main's first
// commit, as GiteaBot.
func (g *Gitea) seed(t T, seed string) {
	t.Helper()
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if seed == "" {
		seed = SeedDir(t, map[string]string{"README.md": "# plans\n"})
	}
	if err := os.CopyFS(dir, os.DirFS(seed)); err != nil {
		t.Fatalf("testenv: copy the seed: %v", err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	h, err := wt.Commit("Seed the plans", &git.CommitOptions{Author: g.signature(GiteaBot)})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if _, err := repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{g.RepoURL()}}); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	err = repo.Push(&git.PushOptions{Auth: g.Auth(GiteaBot),
		RefSpecs: []config.RefSpec{config.RefSpec(h.String() + ":refs/heads/main")}})
	if err != nil {
		t.Fatalf("testenv: push the seed to gitea: %v", err)
	}
}

func (g *Gitea) signature(login string) *object.Signature {
	return &object.Signature{Name: login, Email: login + "@ferry.invalid", When: time.Now()}
}

// PushBranch commits files (path -> content; "" deletes the file) as login
// onto branch, which it creates from main when it does not exist, with
// message, and pushes; it returns the commit.
func (g *Gitea) PushBranch(t T, login, branch, message string, files map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	repo, err := git.PlainCloneContext(ctx, dir, false, &git.CloneOptions{URL: g.RepoURL(), Auth: g.Auth(login)})
	if err != nil {
		t.Fatalf("testenv: clone %s as %s: %v", g.RepoURL(), login, err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	remote := "refs/remotes/origin/" + branch
	opts := &git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName(branch), Create: true}
	if ref, err := repo.Reference(plumbing.ReferenceName(remote), true); err == nil {
		opts.Hash = ref.Hash()
	}
	if head, err := repo.Head(); err != nil || head.Name() != opts.Branch {
		// The clone has main checked out already: a push to main
		// commits onto it.
		if err := wt.Checkout(opts); err != nil {
			t.Fatalf("testenv: check out %s: %v", branch, err)
		}
	}
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if content == "" {
			if _, err := wt.Remove(name); err != nil {
				t.Fatalf("testenv: remove %s: %v", name, err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatalf("testenv: %v", err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatalf("testenv: %v", err)
		}
		if _, err := wt.Add(name); err != nil {
			t.Fatalf("testenv: add %s: %v", name, err)
		}
	}
	h, err := wt.Commit(message, &git.CommitOptions{Author: g.signature(login)})
	if err != nil {
		t.Fatalf("testenv: commit: %v", err)
	}
	err = repo.PushContext(ctx, &git.PushOptions{Auth: g.Auth(login),
		RefSpecs: []config.RefSpec{config.RefSpec("refs/heads/" + branch + ":refs/heads/" + branch)}})
	if err != nil {
		t.Fatalf("testenv: push %s as %s: %v", branch, login, err)
	}
	return h.String()
}

// PushCommit pushes commit sha, which the repository has on some branch,
// to branch as login, with git on the command line: force makes it a
// force-push, which may rewrite branch's history.
func (g *Gitea) PushCommit(t T, login, sha, branch string, force bool) {
	t.Helper()
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("testenv: git %s: %v\n%s", args[0], err, strings.ReplaceAll(string(out), g.tokens[login], "***"))
		}
	}
	git("init", "-q", "--bare")
	git("fetch", "-q", g.CloneURL(login), "+refs/heads/*:refs/heads/*")
	spec := sha + ":refs/heads/" + branch
	if force {
		spec = "+" + spec
	}
	git("push", "-q", g.CloneURL(login), spec)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
