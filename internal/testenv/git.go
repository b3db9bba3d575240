package testenv

import (
	"context"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/ferry-dev/ferry/internal/gitserver"
)

// Git is a running Git server with one bare repository.
type Git struct {
	// URL is the repository's http:// URL, for go-git or git.
	URL string
	// Dir is the bare repository on disk, for checking what a push stored.
	Dir string
	// Server serves the repositories; CreateRepo adds more next to Dir.
	Server *gitserver.Server
	// BaseURL is where the server listens; a repository created with
	// Server.CreateRepo(name) is at BaseURL + "/" + name + ".git".
	BaseURL string
}

// StartGit serves a bare repository named "plans" over http:// on a random
// port, seeded with the files under seed (none when seed is empty).
func StartGit(t T, seed string) *Git {
	t.Helper()
	srv, err := gitserver.New(t.TempDir())
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	dir, err := srv.CreateRepo(context.Background(), "plans", seed)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &Git{URL: hs.URL + "/plans.git", Dir: dir, Server: srv, BaseURL: hs.URL}
}

// SeedDir writes files (path -> content) under a new temporary directory
// and returns it, to seed StartGit with.
func SeedDir(t T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatalf("testenv: %v", err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatalf("testenv: %v", err)
		}
	}
	return dir
}

// FreeAddr returns a loopback address whose port was free a moment ago,
// for a server that must be given its address up front.
func FreeAddr(t T) string {
	t.Helper()
	return freeAddrOn(t, "127.0.0.1")
}

// freeAddrOn is FreeAddr on another local IP address.
func freeAddrOn(t T, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("testenv: no free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
