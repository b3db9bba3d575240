package gitserver

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Server serves the bare repositories under one root directory; a repository
// at <root>/<name>.git is at <base URL>/<name>.git.
type Server struct {
	root    string
	backend http.Handler
}

var _ http.Handler = (*Server)(nil)

// New returns a Server for the repositories under root, which must exist. It
// fails when git or its http-backend is not installed.
func New(root string) (*Server, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("git server root %s: %w", root, err)
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("git server root %s: not a directory", root)
	}
	execPath, err := runGit(context.Background(), nil, "--exec-path")
	if err != nil {
		return nil, fmt.Errorf("find git-http-backend: %w (is git installed?)", err)
	}
	backend := filepath.Join(strings.TrimSpace(execPath), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		return nil, fmt.Errorf("find git-http-backend: %w", err)
	}
	return &Server{
		root: root,
		backend: &cgi.Handler{
			Path: backend,
			Root: "/",
			Env: append(hermeticEnv(),
				"GIT_PROJECT_ROOT="+root,
				"GIT_HTTP_EXPORT_ALL=1",
			),
		},
	}, nil
}

// ServeHTTP answers Git's smart HTTP protocol (clone, fetch, push).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.backend.ServeHTTP(w, r)
}

// CreateRepo creates the bare repository <name>.git with default branch main
// and pushes over HTTP enabled. When seed is not empty, the files under that
// directory become the repository's first commit, with a fixed author and
// date so that the same files always give the same commit ID. It returns the
// repository's directory.
func (s *Server) CreateRepo(ctx context.Context, name, seed string) (string, error) {
	dir := filepath.Join(s.root, name+".git")
	if _, err := os.Stat(dir); err == nil {
		return "", fmt.Errorf("create repository %s: %w", dir, os.ErrExist)
	}
	steps := [][]string{
		{"init", "--quiet", "--bare", "--initial-branch=main", dir},
		{"--git-dir", dir, "config", "http.receivepack", "true"},
	}
	for _, args := range steps {
		if _, err := runGit(ctx, nil, args...); err != nil {
			return "", fmt.Errorf("create repository %s: %w", dir, err)
		}
	}
	if seed == "" {
		return dir, nil
	}
	if err := commitTree(ctx, dir, seed); err != nil {
		return "", fmt.Errorf("seed repository %s from %s: %w", dir, seed, err)
	}
	return dir, nil
}

// commitTree commits every file under tree to the bare repository's main
// branch, using a scratch index so that tree itself is only read.
func commitTree(ctx context.Context, bare, tree string) error {
	scratch, err := os.MkdirTemp("", "gitserver-index-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	env := []string{
		"GIT_INDEX_FILE=" + filepath.Join(scratch, "index"),
		"GIT_AUTHOR_NAME=ferry seed", "GIT_AUTHOR_EMAIL=seed@ferry.invalid",
		"GIT_COMMITTER_NAME=ferry seed", "GIT_COMMITTER_EMAIL=seed@ferry.invalid",
		"GIT_AUTHOR_DATE=2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2026-01-01T00:00:00Z",
	}
	base := []string{"--git-dir", bare, "--work-tree", tree}
	if _, err := runGit(ctx, env, append(base, "add", "--all", ".")...); err != nil {
		return err
	}
	_, err = runGit(ctx, env, append(base, "commit", "--quiet", "--message", "Seed repository")...)
	return err
}

// hermeticEnv keeps the machine's and the user's Git configuration out of
// every git process the server runs.
func hermeticEnv() []string {
	return []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0"}
}

// runGit runs git with a hermetic environment plus env and returns its
// standard output; a failure carries git's standard error.
func runGit(ctx context.Context, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Env = append(append(os.Environ(), hermeticEnv()...), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		// The arguments are paths and fixed words, never credentials.
		cmdline := "git " + strings.Join(args, " ")
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return "", fmt.Errorf("%s: %w: %s", cmdline, err, msg)
		}
		return "", fmt.Errorf("%s: %w", cmdline, err)
	}
	return stdout.String(), nil
}
