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

// client is a GitHub client of the stand-in that knows its login already,
// as a reconciler does after its first look-up, so that the tests count the
// calls of the operation they test only; TestLogin tests the look-up.
func client(t *testing.T, f *fakegithub.Server) *GitHub {
	t.Helper()
	g, err := New(f.Owner, f.Repo, f.Token, f.URL)
	if err != nil {
		t.Fatal(err)
	}
	g.memo.self = fakegithub.Bot
	return g
}

const bot = fakegithub.Bot
