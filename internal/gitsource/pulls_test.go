package gitsource_test

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestPullHeads: the ls-remote every poll makes lists the pull requests'
// heads, so a new push to a pull request is seen without a fetch or a
// forge call; FetchPull brings a head in once, and FS reads its tree.
func TestPullHeads(t *testing.T) {
	g := testenv.StartGit(t, seedPlans(t))
	src := newSource(t, g.URL)
	main, _ := poll(t, src)
	if heads := src.PullHeads(); len(heads) != 0 {
		t.Fatalf("pull heads before any pull request: %v", heads)
	}

	c := cloneRepo(t, g.URL)
	c.checkout("approve-cluster", true)
	first := c.change("plans/capi-quickstart.yaml", testenv.ExamplePlan(t, "cluster"), "Approve cluster")
	c.pushPull(7)
	rev, changed := poll(t, src)
	if rev != main || changed {
		t.Fatalf("poll after a pull request push = %s (changed %v); main is still %s", rev, changed, main)
	}
	if got := src.PullHeads()[7]; got != first {
		t.Fatalf("pull heads %v; want #7 at %s", src.PullHeads(), first)
	}
	if _, err := src.FS(first); !errors.Is(err, gitsource.ErrUnknownRevision) {
		t.Fatalf("FS of an unfetched pull head: %v; want ErrUnknownRevision", err)
	}
	fetches := src.Stats().Fetches
	if err := src.FetchPull(t.Context(), 7, first); err != nil {
		t.Fatal(err)
	}
	if err := src.FetchPull(t.Context(), 7, first); err != nil {
		t.Fatal(err)
	}
	if got := src.Stats().Fetches - fetches; got != 1 {
		t.Errorf("two FetchPulls of one head made %d fetches; want 1", got)
	}
	fsys, err := src.FS(first)
	if err != nil {
		t.Fatal(err)
	}
	data, err := fs.ReadFile(fsys, "plans/capi-quickstart.yaml")
	if err != nil || !strings.Contains(string(data), `approve: "cluster"`) {
		t.Fatalf("plan at the pull request's head: %v\n%s", err, data)
	}

	// A second push to the pull request moves its head; a stale head
	// that the ref no longer holds is refused by name.
	second := c.change("plans/capi-quickstart.yaml", testenv.ExamplePlan(t, "control-plane"), "Approve control-plane")
	c.pushPull(7)
	poll(t, src)
	if got := src.PullHeads()[7]; got != second {
		t.Fatalf("pull head after a second push = %s; want %s", got, second)
	}
	bogus := gitsource.Revision(strings.Repeat("ab", 20))
	if err := src.FetchPull(t.Context(), 7, bogus); err == nil || !strings.Contains(err.Error(), "#7") {
		t.Fatalf("FetchPull of a head the ref does not hold: %v", err)
	}
	if _, err := src.FS(second); err != nil {
		t.Fatalf("the fetch for the stale head brought the new one in: %v", err)
	}
	if err := src.FetchPull(t.Context(), 0, second); err == nil {
		t.Error("FetchPull of #0 succeeded")
	}
}
