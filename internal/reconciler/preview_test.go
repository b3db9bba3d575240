package reconciler

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/ferry-dev/ferry/internal/testing/golden"
	"github.com/ferry-dev/ferry/internal/testing/testenv"

	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/planfile"
)

// pulls is a PullSource in memory: a tree per head.
type pulls struct {
	heads   map[int]string
	trees   map[string]fstest.MapFS
	fetched []string
}

func (p *pulls) PullHeads() map[int]string { return p.heads }
func (p *pulls) FetchPull(_ context.Context, n int, head string) error {
	if _, ok := p.trees[head]; !ok {
		return fmt.Errorf("pull request #%d: head %s not found", n, head)
	}
	p.fetched = append(p.fetched, head)
	return nil
}
func (p *pulls) FS(rev string) (fs.FS, error) { return p.trees[rev], nil }

// forgeLog is a Forge that lists fixed pull requests and records comments.
type forgeLog struct {
	prs      []forge.PullRequest
	lists    int
	comments map[int]string
	statuses map[string]string // "sha context" -> "state: description"
}

func (f *forgeLog) PullRequestsForCommit(context.Context, string) ([]forge.PullRequest, error) {
	return nil, nil
}
func (f *forgeLog) OpenPullRequests(context.Context) ([]forge.PullRequest, error) {
	f.lists++
	return f.prs, nil
}
func (f *forgeLog) UpsertComment(_ context.Context, pr int, key, body string) error {
	if key != PreviewKey {
		return fmt.Errorf("key %q", key)
	}
	f.comments[pr] = body
	return nil
}
func (f *forgeLog) SetStatus(_ context.Context, sha, statusContext, state, description, _ string) error {
	if f.statuses == nil {
		f.statuses = map[string]string{}
	}
	f.statuses[sha+" "+statusContext] = state + ": " + description
	return nil
}

// Permission: the account "maintainer" may write; any other may not.
func (f *forgeLog) Permission(_ context.Context, login string) (string, error) {
	if login == "maintainer" {
		return forge.PermissionWrite, nil
	}
	return forge.PermissionNone, nil
}
func (f *forgeLog) PullRequestComments(context.Context, int) ([]forge.IssueComment, error) {
	return nil, nil
}
func (f *forgeLog) Login(context.Context) (string, error) { return "ferry", nil }

func tree(files map[string]string) fstest.MapFS {
	m := fstest.MapFS{}
	for name, data := range files {
		m[name] = &fstest.MapFile{Data: []byte(data)}
	}
	return m
}

// TestPreviews: the preview text (golden), which pull requests get one,
// and that an unchanged set of heads costs no forge call. A fork's pull
// request of the same plan is previewed from the plan alone (golden),
// without observing anything.
func TestPreviews(t *testing.T) {
	ctx := context.Background()
	good := testenv.ExamplePlan(t, "cluster")
	src := &pulls{
		heads: map[int]string{1: "head1", 2: "head2", 3: "head3", 4: "head4", 5: "head5"},
		trees: map[string]fstest.MapFS{
			"head1": tree(map[string]string{
				"plans/capi-quickstart.yaml": good,
				"plans/broken.yaml":          "apiVersion: ferry.dev/v1alpha1\nkind: MigrationPlan\nmetadata:\n  name: broken\n  labels: {}\n",
			}),
			"head2": tree(map[string]string{"README.md": "docs"}),
			"head3": tree(map[string]string{"plans/capi-quickstart.yaml": good}),
			"head4": tree(map[string]string{}),
			"head5": tree(map[string]string{"plans/capi-quickstart.yaml": testenv.ExamplePlan(t, "")}),
		},
	}
	fg := &forgeLog{comments: map[int]string{}, prs: []forge.PullRequest{
		{Number: 1, HeadSHA: "head1", BaseRef: "main", Author: "maintainer", Files: []string{"plans/broken.yaml", "plans/capi-quickstart.yaml", "plans/retired.yaml"}},
		{Number: 2, HeadSHA: "head2", BaseRef: "main", Author: "maintainer", Files: []string{"README.md"}},
		{Number: 3, HeadSHA: "head3", BaseRef: "release", Author: "maintainer", Files: []string{"plans/capi-quickstart.yaml"}},
		{Number: 4, HeadSHA: "head4", BaseRef: "main", Author: "maintainer", Files: []string{"plans/notes.txt"}},
		{Number: 5, HeadSHA: "head5", BaseRef: "main", Author: "maintainer", Fork: true, Files: []string{"plans/capi-quickstart.yaml"}},
	}}
	obs := &fixedObserver{}
	p := &Previews{Forge: fg, Pulls: src, Observer: obs, Branch: "main", Path: "plans"}
	noRecord := func(string) observed.Record { return observed.Record{} }

	if err := p.Update(ctx, Base{}, noRecord); err != nil {
		t.Fatal(err)
	}
	if len(fg.comments) != 2 || fg.comments[1] == "" || fg.comments[5] == "" {
		t.Fatalf("previews on %d pull requests; want two, on #1 and #5 (#2 and #4 change no plan, #3 is into another branch)", len(fg.comments))
	}
	golden.Check(t, filepath.Join("testdata", "preview.md"), []byte(fg.comments[1]))
	golden.Check(t, filepath.Join("testdata", "preview-fork.md"), []byte(fg.comments[5]))
	if len(obs.records) != 1 {
		t.Errorf("%d observations; want one, of #1's plan (a fork's pull request is not observed)", len(obs.records))
	}
	delete(fg.comments, 5) // #5 closed
	fg.prs = fg.prs[:4]
	src.heads = map[int]string{1: "head1", 2: "head2", 3: "head3", 4: "head4"}
	if err := p.Update(ctx, Base{}, noRecord); err != nil {
		t.Fatal(err)
	}

	// Same heads: no forge call at all. A push to #1: only #1 again.
	if err := p.Update(ctx, Base{}, noRecord); err != nil || fg.lists != 2 {
		t.Fatalf("an idle update listed pull requests (%d lists, %v)", fg.lists, err)
	}
	src.heads = map[int]string{1: "head1b", 2: "head2", 3: "head3", 4: "head4"}
	src.trees["head1b"] = tree(map[string]string{"plans/capi-quickstart.yaml": good})
	fg.prs[0].HeadSHA, fg.prs[0].Files = "head1b", []string{"plans/capi-quickstart.yaml"}
	src.fetched = nil
	if err := p.Update(ctx, Base{}, noRecord); err != nil {
		t.Fatal(err)
	}
	if len(src.fetched) != 1 || src.fetched[0] != "head1b" || strings.Contains(fg.comments[1], "broken") || !strings.Contains(fg.comments[1], "head1b") {
		t.Errorf("after a push to #1: fetched %v, comment:\n%s", src.fetched, fg.comments[1])
	}

	// The API lags behind the ls-remote: the next update looks again.
	src.heads = map[int]string{1: "head1c"}
	if err := p.Update(ctx, Base{}, noRecord); err != nil {
		t.Fatal(err)
	}
	lists := fg.lists
	_ = p.Update(ctx, Base{}, noRecord)
	if fg.lists != lists+1 {
		t.Error("an update that saw the API lag behind Git was not repeated")
	}

	// A head that cannot be fetched fails the update; the next one retries.
	src.heads = map[int]string{1: "gone"}
	fg.prs = []forge.PullRequest{{Number: 1, HeadSHA: "gone", BaseRef: "main", Files: []string{"plans/capi-quickstart.yaml"}}}
	if err := p.Update(ctx, Base{}, noRecord); err == nil || !strings.Contains(err.Error(), "#1") {
		t.Fatalf("update with an unfetchable head: %v", err)
	}
	lists = fg.lists
	_ = p.Update(ctx, Base{}, noRecord)
	if fg.lists != lists+1 {
		t.Error("a failed update was not retried at the next one")
	}
}

// TestPreviewsListedLate is the race `make demo` lost: the ls-remote shows
// refs/pull/3/head before the forge's API lists pull request #3, and the
// webhook that follows changes no head. The pull request is previewed once
// the API lists it; a head the API never lists stops costing a list call
// after APILag.
func TestPreviewsListedLate(t *testing.T) {
	ctx := context.Background()
	good := testenv.ExamplePlan(t, "cluster")
	src := &pulls{
		heads: map[int]string{1: "head1", 3: "head3"},
		trees: map[string]fstest.MapFS{"head3": tree(map[string]string{"plans/capi-quickstart.yaml": good})},
	}
	fg := &forgeLog{comments: map[int]string{}} // #3 not listed yet; #1 closed long ago
	now := time.Date(2026, 11, 24, 2, 10, 46, 0, time.UTC)
	p := &Previews{Forge: fg, Pulls: src, Observer: &fixedObserver{}, Branch: "main", Path: "plans", Now: func() time.Time { return now }}
	noRecord := func(string) observed.Record { return observed.Record{} }

	if err := p.Update(ctx, Base{}, noRecord); err != nil || len(fg.comments) != 0 {
		t.Fatalf("first update: %v, %d comments", err, len(fg.comments))
	}
	now = now.Add(10 * time.Second)
	fg.prs = []forge.PullRequest{{Number: 3, HeadSHA: "head3", BaseRef: "main", Files: []string{"plans/capi-quickstart.yaml"}}}
	if err := p.Update(ctx, Base{}, noRecord); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fg.comments[3], "head3") {
		t.Fatalf("pull request #3, listed by the API after Git showed its head, has no preview: %q", fg.comments[3])
	}

	// #1's head is never listed: after APILag it no longer makes every
	// update list pull requests.
	now = now.Add(2 * time.Minute)
	_ = p.Update(ctx, Base{}, noRecord)
	lists := fg.lists
	if err := p.Update(ctx, Base{}, noRecord); err != nil || fg.lists != lists {
		t.Errorf("a head the API never lists is listed for at every update after APILag (%d lists, %v)", fg.lists-lists, err)
	}
}

// TestPreviewsOutsiders: a pull request whose author may not write to the
// repository, or whose author is not known, is previewed from its plans
// alone, like a fork's, and says why; a maintainer's is observed.
func TestPreviewsOutsiders(t *testing.T) {
	ctx := context.Background()
	good := testenv.ExamplePlan(t, "cluster")
	src := &pulls{heads: map[int]string{1: "head", 2: "head", 3: "head"},
		trees: map[string]fstest.MapFS{"head": tree(map[string]string{"plans/capi-quickstart.yaml": good})}}
	files := []string{"plans/capi-quickstart.yaml"}
	fg := &forgeLog{comments: map[int]string{}, prs: []forge.PullRequest{
		{Number: 1, HeadSHA: "head", BaseRef: "main", Author: "maintainer", Files: files},
		{Number: 2, HeadSHA: "head", BaseRef: "main", Author: "mallory", Files: files},
		{Number: 3, HeadSHA: "head", BaseRef: "main", Files: files},
	}}
	obs := &fixedObserver{snap: observed.Snapshot{WorkloadError: "workload cluster capi-quickstart: dial tcp 10.0.0.7:6443: connection refused"}}
	p := &Previews{Forge: fg, Pulls: src, Observer: obs, Branch: "main", Path: "plans"}
	if err := p.Update(ctx, Base{}, func(string) observed.Record { return observed.Record{} }); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fg.comments[1], "10.0.0.7") || !strings.Contains(fg.comments[1], "Steps of phase cluster") {
		t.Errorf("the maintainer's preview shows no live state:\n%s", fg.comments[1])
	}
	for n, why := range map[int]string{2: "its author @mallory has none access to the repository, not write", 3: "its author is not known"} {
		c := fg.comments[n]
		if strings.Contains(c, "10.0.0.7") || strings.Contains(c, "Steps of phase") || !strings.Contains(c, why) ||
			!strings.Contains(c, "  cluster        approved\n  control-plane  not approved\n") {
			t.Errorf("#%d's preview shows the live state or not the plan alone, or does not say %q:\n%s", n, why, c)
		}
	}
	if len(obs.records) != 1 {
		t.Errorf("%d observations; want one, of the maintainer's pull request", len(obs.records))
	}
}

// TestPreviewsBounded: a pull request whose plans directory holds more
// plan files than Limits allow is not read; its preview says so, and the
// gate fails.
func TestPreviewsBounded(t *testing.T) {
	ctx := context.Background()
	src := &pulls{heads: map[int]string{1: "head"}, trees: map[string]fstest.MapFS{"head": tree(map[string]string{
		"plans/capi-quickstart.yaml": testenv.ExamplePlan(t, "cluster"),
		"plans/b.yaml":               "b",
		"plans/c.yaml":               "c",
	})}}
	fg := &forgeLog{comments: map[int]string{}, prs: []forge.PullRequest{
		{Number: 1, HeadSHA: "head", BaseRef: "main", Author: "maintainer", Files: []string{"plans/capi-quickstart.yaml"}},
	}}
	obs := &fixedObserver{}
	p := &Previews{Forge: fg, Pulls: src, Observer: obs, Branch: "main", Path: "plans", Limits: planfile.Limits{Files: 2}}
	if err := p.Update(ctx, Base{}, func(string) observed.Record { return observed.Record{} }); err != nil {
		t.Fatal(err)
	}
	if c := fg.comments[1]; !strings.Contains(c, "#### Not previewed") || !strings.Contains(c, "plans holds 3 plan files; at most 2 are read") {
		t.Errorf("preview of a pull request over the limits:\n%s", c)
	}
	if got := fg.statuses["head "+GateContext]; !strings.HasPrefix(got, forge.StateFailure) {
		t.Errorf("gate of a pull request over the limits: %q; want failure", got)
	}
	if len(obs.records) != 0 {
		t.Errorf("a pull request over the limits was observed %d time(s)", len(obs.records))
	}
}

// TestPreviewsOnGitea previews real pull requests of a real Gitea, read
// through the Git source as the reconciler reads them:
//
//   - a maintainer's pull request that adds an 8 MiB file under plans/:
//     the comment names the file, its size and the limit, the gate fails,
//     and the preview does not read the file (Update, which lists,
//     loads and comments on every pull request through the forge's API,
//     allocates under half its size; the heads are fetched before, since
//     go-git's fetch inflates each object it indexes once, whatever reads
//     it after);
//   - one plan change from a maintainer, from a reader (mallory may read
//     the repository, not write) and from the reader's fork: the
//     maintainer's preview shows the live state (an address the observer
//     saw), the others the plan alone, with why, and nothing is observed
//     for them.
func TestPreviewsOnGitea(t *testing.T) {
	ctx := t.Context()
	g := testenv.StartGitea(t, testenv.SeedDir(t, map[string]string{quickstart: testenv.ExamplePlan(t, "")}))
	bot, maintainer, reader := testenv.GiteaBot, testenv.GiteaMaintainer, testenv.GiteaReader
	fg, src := asFerry(t, g)

	change := map[string]string{quickstart: testenv.ExamplePlan(t, "cluster")}
	g.PushBranch(t, maintainer, "approve-cluster", "Approve cluster", change)
	own := g.OpenPullRequest(t, maintainer, "approve-cluster", "Approve cluster")
	g.PushBranch(t, maintainer, "for-mallory", "Approve cluster", change)
	readers := g.OpenPullRequest(t, reader, "for-mallory", "Approve cluster")
	g.API(t, reader, http.MethodPost, "/repos/"+g.Owner+"/"+g.Repo+"/forks", map[string]any{}, nil)
	forked := g.OpenPullRequest(t, reader, reader+":approve-cluster", "Approve cluster")

	const size = 8 << 20
	rnd := rand.New(rand.NewPCG(3, 4))
	var b strings.Builder
	for b.Len() < size {
		fmt.Fprintf(&b, "# %016x%016x%016x%016x\n", rnd.Uint64(), rnd.Uint64(), rnd.Uint64(), rnd.Uint64())
	}
	huge := b.String()
	hugeHead := g.PushBranch(t, maintainer, "huge", "Add a huge file", map[string]string{"plans/huge.yaml": huge})
	hugePR := g.OpenPullRequest(t, maintainer, "huge", "Add a huge file")

	if _, _, err := src.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	heads := src.PullHeads()
	for _, n := range []int{own, readers, forked, hugePR} {
		if err := src.FetchPull(ctx, n, heads[n]); err != nil {
			t.Fatalf("fetch #%d: %v", n, err)
		}
	}
	obs := &fixedObserver{snap: observed.Snapshot{Secrets: adoptSecrets(),
		WorkloadError: "workload cluster capi-quickstart: dial tcp 10.0.0.7:6443: connection refused"}}
	p := &Previews{Forge: fg, Pulls: GitSource{Source: src}, Observer: obs, Branch: "main", Path: "plans"}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	err := p.Update(ctx, Base{}, func(string) observed.Record { return observed.Record{} })
	runtime.ReadMemStats(&ms)
	if err != nil {
		t.Fatal(err)
	}
	alloc := ms.TotalAlloc - before
	t.Logf("the previews of 4 pull requests allocated %d bytes beside a %d-byte plans/huge.yaml", alloc, len(huge))
	if alloc > size/2 {
		t.Errorf("the previews allocated %d bytes: the %d-byte plans/huge.yaml was read", alloc, len(huge))
	}

	preview := func(n int) string {
		t.Helper()
		for _, c := range g.Comments(t, n) {
			if c.User.Login == bot && strings.HasPrefix(c.Body, forge.Marker(PreviewKey)) {
				return c.Body
			}
		}
		t.Fatalf("no preview on #%d", n)
		return ""
	}
	if c, want := preview(hugePR), fmt.Sprintf("plans/huge.yaml: file is %d bytes; a plan may be at most %d; it was not read", len(huge), planfile.MaxSize); !strings.Contains(c, want) {
		t.Errorf("preview of #%d does not say %q:\n%s", hugePR, want, c)
	}
	gate := ""
	for _, s := range g.Statuses(t, hugeHead) {
		if s.Context == GateContext {
			gate = s.Status
		}
	}
	if gate != forge.StateFailure {
		t.Errorf("%s of #%d: %q; want failure", GateContext, hugePR, gate)
	}

	if c := preview(own); !strings.Contains(c, "10.0.0.7") || !strings.Contains(c, "Steps of phase cluster") {
		t.Errorf("the maintainer's preview shows no live state:\n%s", c)
	}
	for n, why := range map[int]string{
		readers: "its author @" + reader + " has read access to the repository, not write",
		forked:  "it comes from a fork",
	} {
		c := preview(n)
		if strings.Contains(c, "10.0.0.7") || strings.Contains(c, "Steps of phase") || !strings.Contains(c, why) ||
			!strings.Contains(c, "  cluster        approved\n  control-plane  not approved\n") {
			t.Errorf("#%d's preview shows the live state, or not the plan alone, or does not say %q:\n%s", n, why, c)
		}
	}
	if len(obs.records) != 1 {
		t.Errorf("%d observations; want one, for the maintainer's pull request", len(obs.records))
	}
}
