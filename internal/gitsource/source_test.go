package gitsource_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestPollSkipsFetchWhenHeadUnchanged follows a branch through pushes, a
// restart and a reset, counting what was asked of the server.
func TestPollSkipsFetchWhenHeadUnchanged(t *testing.T) {
	g := testenv.StartGit(t, seedPlans(t))
	cache := t.TempDir()
	src, err := gitsource.New(gitsource.Config{URL: g.URL, CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	wantStats := func(src *gitsource.Source, want gitsource.Stats) {
		t.Helper()
		if got := src.Stats(); got != want {
			t.Fatalf("stats %+v; want %+v", got, want)
		}
	}

	first, changed := poll(t, src)
	if !changed || first != serverHead(t, g.Dir) {
		t.Fatalf("first poll = %s, changed %v; want the server's head %s, changed", first, changed, serverHead(t, g.Dir))
	}
	wantStats(src, gitsource.Stats{Polls: 1, LsRemotes: 1, Fetches: 1})

	again, changed := poll(t, src)
	if changed || again != first {
		t.Fatalf("second poll = %s, changed %v; want %s, unchanged", again, changed, first)
	}
	wantStats(src, gitsource.Stats{Polls: 2, LsRemotes: 2, Fetches: 1})

	c := cloneRepo(t, g.URL)
	pushed := c.change("plans/README.md", "Plans.\n", "Add a README")
	c.push()
	next, changed := poll(t, src)
	if !changed || next != pushed {
		t.Fatalf("poll after push = %s, changed %v; want the pushed %s, changed", next, changed, pushed)
	}
	wantStats(src, gitsource.Stats{Polls: 3, LsRemotes: 3, Fetches: 2})

	// A restart keeps the cache: the first poll reports the head (the new
	// process has seen nothing yet) but has nothing to fetch.
	restarted, err := gitsource.New(gitsource.Config{URL: g.URL, CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if rev, changed := poll(t, restarted); !changed || rev != pushed {
		t.Fatalf("poll after restart = %s, changed %v; want %s, changed", rev, changed, pushed)
	}
	wantStats(restarted, gitsource.Stats{Polls: 1, LsRemotes: 1, Fetches: 0})

	// Someone resets main to the seed commit: the cache holds it already.
	bare, err := git.PlainOpen(g.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := bare.Storer.SetReference(plumbing.NewHashReference("refs/heads/main", plumbing.NewHash(string(first)))); err != nil {
		t.Fatal(err)
	}
	if rev, changed := poll(t, src); !changed || rev != first {
		t.Fatalf("poll after reset = %s, changed %v; want %s, changed", rev, changed, first)
	}
	wantStats(src, gitsource.Stats{Polls: 4, LsRemotes: 4, Fetches: 2})
}

// TestPollFileURL reads a bare repository on disk, by file URL and by path.
func TestPollFileURL(t *testing.T) {
	g := testenv.StartGit(t, seedPlans(t))
	want := serverHead(t, g.Dir)
	for _, url := range []string{"file://" + g.Dir, g.Dir} {
		t.Run(url, func(t *testing.T) {
			src := newSource(t, url)
			rev, changed := poll(t, src)
			if !changed || rev != want {
				t.Fatalf("poll = %s, changed %v; want %s", rev, changed, want)
			}
			if _, changed := poll(t, src); changed {
				t.Fatal("second poll changed")
			}
			if st := src.Stats(); st.Fetches != 1 {
				t.Fatalf("fetches %d; want 1", st.Fetches)
			}
			fsys, err := src.FS(rev)
			if err != nil {
				t.Fatal(err)
			}
			got, err := fs.ReadFile(fsys, "plans/capi-quickstart.yaml")
			if err != nil || string(got) != exampleFile(t, "capi-quickstart.yaml") {
				t.Fatalf("plans/capi-quickstart.yaml = %.40q…, %v; want the example", got, err)
			}
		})
	}
}

// TestPollErrors checks what a poll that cannot succeed says, and whether
// it is worth retrying.
func TestPollErrors(t *testing.T) {
	g := testenv.StartGit(t, seedPlans(t))
	if _, err := g.Server.CreateRepo(t.Context(), "empty", ""); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		cfg      gitsource.Config
		want     error // errors.Is, when set
		terminal bool
	}{
		{name: "missing branch", cfg: gitsource.Config{URL: g.URL, Branch: "nope"}, want: gitsource.ErrBranchNotFound},
		{name: "empty repository", cfg: gitsource.Config{URL: g.BaseURL + "/empty.git"}, want: gitsource.ErrBranchNotFound},
		{name: "missing repository", cfg: gitsource.Config{URL: g.BaseURL + "/missing.git"}, terminal: true},
		{name: "unreachable server", cfg: gitsource.Config{URL: "http://127.0.0.1:1/plans.git"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.CacheDir = t.TempDir()
			src, err := gitsource.New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			rev, changed, err := src.Poll(t.Context())
			if err == nil {
				t.Fatalf("poll = %s, %v; want an error", rev, changed)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("poll: %v; want %v", err, tc.want)
			}
			if got := failure.IsTerminal(err); got != tc.terminal {
				t.Errorf("poll: %v: terminal %v; want %v", err, got, tc.terminal)
			}
			if rev != "" || changed {
				t.Errorf("failed poll returned %q, changed %v", rev, changed)
			}
			if st := src.Stats(); st.Failures != 1 || st.Fetches != 0 {
				t.Errorf("stats %+v; want one failure, no fetch", st)
			}
		})
	}
}

// TestCredentialsNeverInErrors polls with credentials that the server
// cannot check (it cannot be reached, or has no such repository) and looks
// for them in the error.
func TestCredentialsNeverInErrors(t *testing.T) {
	g := testenv.StartGit(t, seedPlans(t))
	const secret = "s3cr3t-token-value"
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(g.BaseURL, "http://")
	for _, tc := range []struct {
		name string
		cfg  gitsource.Config
	}{
		{name: "password in URL, unreachable", cfg: gitsource.Config{URL: "http://user:" + secret + "@127.0.0.1:1/plans.git"}},
		{name: "token as user, unreachable", cfg: gitsource.Config{URL: "https://" + secret + "@127.0.0.1:1/plans.git"}},
		{name: "token file, unreachable", cfg: gitsource.Config{URL: "http://127.0.0.1:1/plans.git", Auth: gitsource.Auth{TokenFile: tokenFile}}},
		{name: "password in URL, no repository", cfg: gitsource.Config{URL: "http://user:" + secret + "@" + host + "/missing.git"}},
		{name: "token file, no branch", cfg: gitsource.Config{URL: g.URL, Branch: "nope", Auth: gitsource.Auth{TokenFile: tokenFile}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.CacheDir = t.TempDir()
			src, err := gitsource.New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(src.URL(), secret) {
				t.Errorf("URL() = %s; holds the secret", src.URL())
			}
			_, _, err = src.Poll(t.Context())
			if err == nil {
				t.Fatal("poll succeeded; want an error")
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("poll error holds the secret: %v", err)
			}
			if !strings.Contains(err.Error(), src.URL()) {
				t.Errorf("poll error %q does not name the repository %s", err, src.URL())
			}
			t.Logf("%v", err)
		})
	}
}

// TestTokenAuth polls the test server with a token: it does not check it,
// but the token file is read and sent, and the poll works.
func TestTokenAuth(t *testing.T) {
	g := testenv.StartGit(t, seedPlans(t))
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("a-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := gitsource.New(gitsource.Config{URL: g.URL, CacheDir: t.TempDir(), Auth: gitsource.Auth{TokenFile: tokenFile}})
	if err != nil {
		t.Fatal(err)
	}
	if rev, _ := poll(t, src); rev != serverHead(t, g.Dir) {
		t.Fatalf("poll = %s; want %s", rev, serverHead(t, g.Dir))
	}
	// A token file emptied by a botched rotation stops the poll, and says
	// which file, not what was in it.
	if err := os.WriteFile(tokenFile, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = src.Poll(t.Context())
	if err == nil || !strings.Contains(err.Error(), tokenFile) || !failure.IsTerminal(err) {
		t.Fatalf("poll with an empty token file: %v; want a terminal error naming %s", err, tokenFile)
	}
}

// TestNewRefuses checks the configurations refused before any poll.
func TestNewRefuses(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	notRepo := t.TempDir()
	if err := os.WriteFile(filepath.Join(notRepo, "keep.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  gitsource.Config
		want []string // in the message
	}{
		{name: "no URL", cfg: gitsource.Config{}, want: []string{"no repository URL"}},
		{name: "git protocol", cfg: gitsource.Config{URL: "git://example.com/plans.git"}, want: []string{"unsupported protocol"}},
		{name: "ssh without known_hosts", cfg: gitsource.Config{URL: "ssh://git@example.com/plans.git", Auth: gitsource.Auth{SSHKeyFile: file}},
			want: []string{"no known_hosts file", "insecure ignore-host-key"}},
		{name: "scp-like without known_hosts", cfg: gitsource.Config{URL: "git@example.com:org/plans.git", Auth: gitsource.Auth{SSHKeyFile: file}},
			want: []string{"no known_hosts file"}},
		{name: "ssh without key", cfg: gitsource.Config{URL: "ssh://git@example.com/plans.git", Auth: gitsource.Auth{KnownHostsFile: file}},
			want: []string{"needs an SSH key"}},
		{name: "ssh with both host key options", cfg: gitsource.Config{URL: "ssh://git@example.com/plans.git",
			Auth: gitsource.Auth{SSHKeyFile: file, KnownHostsFile: file, InsecureIgnoreHostKey: true}}, want: []string{"choose one"}},
		{name: "ssh with token", cfg: gitsource.Config{URL: "ssh://git@example.com/plans.git", Auth: gitsource.Auth{TokenFile: file}},
			want: []string{"token file given for an ssh URL"}},
		{name: "https with ssh key", cfg: gitsource.Config{URL: "https://example.com/plans.git", Auth: gitsource.Auth{SSHKeyFile: file}},
			want: []string{"SSH settings"}},
		{name: "password and token file", cfg: gitsource.Config{URL: "https://u:hunter2-password@example.com/plans.git", Auth: gitsource.Auth{TokenFile: file}},
			want: []string{"only the token file", "https://***@example.com/plans.git"}},
		{name: "file with token", cfg: gitsource.Config{URL: "file:///srv/plans.git", Auth: gitsource.Auth{TokenFile: file}},
			want: []string{"file URLs take no credentials"}},
		{name: "missing token file", cfg: gitsource.Config{URL: "https://example.com/plans.git", Auth: gitsource.Auth{TokenFile: filepath.Join(dir, "missing")}},
			want: []string{"missing"}},
		{name: "bad branch", cfg: gitsource.Config{URL: "https://example.com/plans.git", Branch: "a..b"}, want: []string{`branch "a..b"`}},
		{name: "path outside", cfg: gitsource.Config{URL: "https://example.com/plans.git", Path: "../plans"}, want: nil},
		{name: "cache holds other files", cfg: gitsource.Config{URL: "https://example.com/plans.git", CacheDir: notRepo},
			want: []string{"holds files but no git repository"}},
		{name: "no cache", cfg: gitsource.Config{URL: "https://example.com/plans.git"}, want: []string{"no cache directory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cfg.CacheDir == "" && tc.name != "no cache" {
				tc.cfg.CacheDir = t.TempDir()
			}
			src, err := gitsource.New(tc.cfg)
			if tc.want == nil {
				// Not refused: "../plans" is cleaned to "plans", inside.
				if err != nil {
					t.Fatalf("new: %v", err)
				}
				if src.PlansDir() != "plans" {
					t.Fatalf("plans dir %q; want plans", src.PlansDir())
				}
				return
			}
			if err == nil {
				t.Fatal("new succeeded; want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("new: %v; want it to say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2-password") {
				t.Errorf("new: %v; holds the password", err)
			}
		})
	}
}

// TestReadsDuringFetch reads a revision's files while polls fetch new
// commits; run with -race, it checks that reads and fetches take turns on
// the cache.
func TestReadsDuringFetch(t *testing.T) {
	g := testenv.StartGit(t, seedPlans(t))
	src := newSource(t, g.URL)
	first, _ := poll(t, src)
	fsys, err := src.FS(first)
	if err != nil {
		t.Fatal(err)
	}
	want := exampleFile(t, "capi-quickstart.yaml")
	c := cloneRepo(t, g.URL)

	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			b, err := fs.ReadFile(fsys, "plans/capi-quickstart.yaml")
			if err != nil || string(b) != want {
				t.Errorf("read during fetch: %.40q…, %v", b, err)
				return
			}
			if _, err := src.Introduced(t.Context(), first, "plans/capi-quickstart.yaml", func([]byte) bool { return true }); err != nil {
				t.Errorf("introduced during fetch: %v", err)
				return
			}
		}
	}()
	for i := range 5 {
		pushed := c.change("notes.txt", strings.Repeat("x", i+1), "Note")
		c.push()
		if rev, _ := poll(t, src); rev != pushed {
			close(stop)
			wg.Wait()
			t.Fatalf("poll = %s; want %s", rev, pushed)
		}
	}
	close(stop)
	wg.Wait()
}
