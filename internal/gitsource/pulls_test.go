package gitsource_test

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/planfile"
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

// TestPullLargeBlobNotRead: a pull request that adds a file far over the
// plan size limit under plans/ is fetched, and its size is known from the
// object's header: loading the plans refuses the file by name, size and
// limit without reading it (what it allocates is a fraction of the
// file's size), and reads the other plans.
func TestPullLargeBlobNotRead(t *testing.T) {
	g := testenv.StartGit(t, seedPlans(t))
	src := newSource(t, g.URL)
	poll(t, src)

	// Incompressible, as an attacker would make it: the pack carries it
	// whole and inflating it would allocate all of it.
	const size = 3 << 20
	random := make([]byte, 32)
	var b strings.Builder
	for rnd := rand.NewChaCha8([32]byte{1, 2}); b.Len() < size; {
		_, _ = rnd.Read(random)
		b.WriteString("# " + hex.EncodeToString(random) + "\n")
	}
	huge := b.String()
	c := cloneRepo(t, g.URL)
	c.checkout("huge", true)
	head := c.change("plans/huge.yaml", huge, "Add a huge file")
	c.pushPull(9)
	poll(t, src)
	if err := src.FetchPull(t.Context(), 9, head); err != nil {
		t.Fatal(err)
	}
	fsys, err := src.FS(head)
	if err != nil {
		t.Fatal(err)
	}

	var files []*planfile.File
	// Other goroutines of the process allocate too, and only add to the
	// count: the least of three loads is the bound that says the most.
	alloc := leastAllocated(3, func() {
		info, err := fs.Stat(fsys, "plans/huge.yaml")
		if err != nil || info.Size() != int64(len(huge)) {
			t.Errorf("stat plans/huge.yaml = %v, %v; want %d bytes", info, err, len(huge))
		}
		files, err = planfile.LoadFS(fsys, "plans")
		want := fmt.Sprintf("plans/huge.yaml: file is %d bytes; a plan may be at most %d; it was not read", len(huge), planfile.MaxSize)
		if err == nil || err.Error() != want {
			t.Errorf("load plans: %v; want %s", err, want)
		}
	})
	if len(files) != 4 {
		t.Errorf("loaded %d plans; want the 4 examples", len(files))
	}
	if alloc > size/2 { // reading the file would allocate all of it
		t.Errorf("stat and load allocated %d bytes for a %d-byte file they do not read", alloc, len(huge))
	}
}

// leastAllocated returns the least of n counts of what f allocates; each
// counts whatever else runs meanwhile, so each is only an upper bound.
func leastAllocated(n int, f func()) uint64 {
	least := allocated(f)
	for range n - 1 {
		least = min(least, allocated(f))
	}
	return least
}

// allocated returns how many bytes f allocates (with whatever else runs
// meanwhile: only an upper bound).
func allocated(f func()) uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	f()
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc - before
}
