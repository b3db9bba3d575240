package forge

import (
	"testing"

	"github.com/ferry-dev/ferry/internal/testing/fakegithub"
)

// newFakeGitHub starts the GitHub stand-in for the tests of this package.
func newFakeGitHub(t *testing.T) *fakegithub.Server {
	t.Helper()
	f := fakegithub.New("ferry-dev", "plans", "ghp_test_token_never_logged")
	t.Cleanup(f.Close)
	return f
}

// client is a GitHub client of the stand-in.
func client(t *testing.T, f *fakegithub.Server) *GitHub {
	t.Helper()
	g, err := New(f.Owner, f.Repo, f.Token, f.URL)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

const bot = fakegithub.Bot
