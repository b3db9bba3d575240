package reconciler

import (
	"errors"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/status/statusfile"
	"github.com/ferry-dev/ferry/internal/testing/statustest"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

const seed = "../testing/testenv/testdata/seed"

// statusesOf returns the rendered cases as the statuses of plans named
// after them, in name order.
func statusesOf(names ...string) []*status.PlanStatus {
	cases := statustest.Cases()
	var out []*status.PlanStatus
	for _, n := range names {
		st := cases[n]
		st.Plan = n
		out = append(out, st)
	}
	return out
}

// gitStore is a GitStatusStore writing to the status branch of url,
// caching in cache ("": in memory).
func gitStore(url, cache string) GitStatusStore {
	return GitStatusStore{Git: &gitsource.Branch{URL: url, Name: statusfile.DefaultBranch, CacheDir: cache}}
}

// TestGitStatusStore: the first write creates the status branch (an
// orphan) with one commit holding every plan's file; a write with one
// plan changed makes one commit touching one file; a write with nothing
// changed makes no commit; Read and ReadAll give back what was written,
// to a Branch with a cache and to one without.
func TestGitStatusStore(t *testing.T) {
	g := testenv.StartGit(t, seed)
	ctx := t.Context()
	mainBefore := g.Run(t, "rev-parse", "refs/heads/main")
	w := gitStore(g.URL, t.TempDir())
	sts := statusesOf("blocked", "failed", "normal")

	first, err := w.Write(ctx, sts)
	if err != nil {
		t.Fatalf("first write: %v", err)
	}
	if got := g.Run(t, "rev-parse", "refs/heads/"+statusfile.DefaultBranch); got != first {
		t.Fatalf("server's %s is %s; want the written commit %s", statusfile.DefaultBranch, got, first)
	}
	if parents := g.Run(t, "log", "-1", "--format=%P", first); parents != "" {
		t.Errorf("first commit has parents %q; want an orphan", parents)
	}
	if files := g.Run(t, "ls-tree", "-r", "--name-only", first); files != "status/blocked.yaml\nstatus/failed.yaml\nstatus/normal.yaml" {
		t.Errorf("first commit holds:\n%s\nwant the three status files only", files)
	}
	if trailers := g.Run(t, "log", "-1", "--format=%(trailers:key=Ferry-Status,valueonly)", first); trailers != "true" {
		t.Errorf("git reads the Ferry-Status trailer as %q; want true", trailers)
	}
	if !ferryCommit(t, g.URL, first) {
		t.Errorf("the Git source does not see %s as ferry's own commit", first)
	}
	if author := g.Run(t, "log", "-1", "--format=%an <%ae>", first); author != "ferry <ferry@ferry.invalid>" {
		t.Errorf("author %q", author)
	}
	if got := g.Run(t, "rev-parse", "refs/heads/main"); got != mainBefore {
		t.Errorf("main moved from %s to %s", mainBefore, got)
	}
	want, _ := statusfile.Encode(sts[2])
	if got := g.Run(t, "show", first+":status/normal.yaml"); got != strings.TrimSpace(string(want)) {
		t.Errorf("status/normal.yaml:\n%s\nwant:\n%s", got, want)
	}

	// One plan changes.
	status.ApplyResult(sts[1], statustest.Event(statustest.Keypair, events.Succeeded, 4, 100, time.Second, "created keypair capi-key", ""))
	second, err := w.Write(ctx, sts)
	if err != nil {
		t.Fatalf("second write: %v", err)
	}
	if second == "" || second == first {
		t.Fatalf("second write made commit %q; want a new one", second)
	}
	if parents := g.Run(t, "log", "-1", "--format=%P", second); parents != first {
		t.Errorf("second commit's parents %q; want %s", parents, first)
	}
	if changed := g.Run(t, "diff", "--name-only", first, second); changed != "status/failed.yaml" {
		t.Errorf("second commit changed %q; want status/failed.yaml only", changed)
	}
	if subject := g.Run(t, "log", "-1", "--format=%s", second); subject != "ferry: status of failed" {
		t.Errorf("subject %q names the plans it did not change", subject)
	}

	// Nothing changes.
	third, err := w.Write(ctx, sts)
	if err != nil || third != "" {
		t.Errorf("write with no change = %q, %v; want no commit", third, err)
	}
	if got := g.Run(t, "rev-parse", "refs/heads/"+statusfile.DefaultBranch); got != second {
		t.Errorf("branch moved to %s without a change", got)
	}

	for _, r := range []GitStatusStore{w, gitStore(g.URL, "")} {
		got, err := r.Read(ctx, "failed")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, sts[1]) {
			t.Errorf("Read(failed) =\n%+v\nwant\n%+v", got, sts[1])
		}
		all, err := r.ReadAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 3 || !reflect.DeepEqual(all, sts) {
			t.Errorf("ReadAll gave %d statuses, not the three written", len(all))
		}
		if _, err := r.Read(ctx, "unknown"); !errors.Is(err, ErrNoStatus) {
			t.Errorf("Read(unknown) = %v; want ErrNoStatus", err)
		}
	}
}

// TestGitStatusStoreNoBranch: before the first write there is no status.
func TestGitStatusStoreNoBranch(t *testing.T) {
	g := testenv.StartGit(t, seed)
	w := gitStore(g.URL, "")
	if _, err := w.Read(t.Context(), "capi-quickstart"); !errors.Is(err, ErrNoStatus) {
		t.Errorf("Read = %v; want ErrNoStatus", err)
	}
	if all, err := w.ReadAll(t.Context()); err != nil || len(all) != 0 {
		t.Errorf("ReadAll = %v, %v; want none", all, err)
	}
	for _, name := range []string{"", "../plans/x", "a/b", ".hidden"} {
		st := statusesOf("normal")[0]
		st.Plan = name
		if _, err := w.Write(t.Context(), []*status.PlanStatus{st}); err == nil {
			t.Errorf("Write of plan %q: no error", name)
		}
	}
	// An empty repository has no branch at all.
	empty := testenv.StartGit(t, "")
	w = gitStore(empty.URL, "")
	if _, err := w.Read(t.Context(), "x"); !errors.Is(err, ErrNoStatus) {
		t.Errorf("Read from an empty repository = %v; want ErrNoStatus", err)
	}
	if c, err := w.Write(t.Context(), statusesOf("normal")); err != nil || c == "" {
		t.Errorf("Write to an empty repository = %q, %v", c, err)
	}
}

// TestGitStatusStoreHumanCommit: a person pushed to the status branch since
// ferry's last write (a note, and an edit of a status file). ferry's next
// commit goes on top of theirs: the note survives, and in the status file
// ferry's version wins.
func TestGitStatusStoreHumanCommit(t *testing.T) {
	g := testenv.StartGit(t, seed)
	ctx := t.Context()
	w := gitStore(g.URL, t.TempDir())
	sts := statusesOf("failed", "normal")
	if _, err := w.Write(ctx, sts); err != nil {
		t.Fatal(err)
	}
	human := g.Push(t, statusfile.DefaultBranch, map[string]string{
		"NOTES.md":           "Do not touch the cloud until Monday.\n",
		"status/normal.yaml": "plan: normal\nrevision: edited-by-hand\nphases: []\n",
	})
	status.ApplyResult(sts[0], statustest.Event(statustest.Keypair, events.Succeeded, 4, 100, time.Second, "", ""))
	commit, err := w.Write(ctx, sts)
	if err != nil {
		t.Fatal(err)
	}
	assertOnTop(t, g, commit, human, sts)
}

// TestGitStatusStoreTrackedBranch: statuses may go to the branch the plans
// are on; the plans stay.
func TestGitStatusStoreTrackedBranch(t *testing.T) {
	g := testenv.StartGit(t, seed)
	ctx := t.Context()
	seedHead := g.Run(t, "rev-parse", "refs/heads/main")
	w := GitStatusStore{Git: &gitsource.Branch{URL: g.URL, Name: "main", CacheDir: t.TempDir()}}
	commit, err := w.Write(ctx, statusesOf("normal"))
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Run(t, "rev-parse", "refs/heads/main"); got != commit {
		t.Fatalf("main is %s; want %s", got, commit)
	}
	if parents := g.Run(t, "log", "-1", "--format=%P", commit); parents != seedHead {
		t.Errorf("parents %q; want the seed commit %s", parents, seedHead)
	}
	files := g.Run(t, "ls-tree", "-r", "--name-only", commit)
	if !strings.Contains(files, "plans/capi-quickstart.yaml") || !strings.Contains(files, "status/normal.yaml") {
		t.Errorf("main holds:\n%s\nwant the plans and the status", files)
	}
	if _, err := exec.LookPath("git"); err == nil {
		// git fsck on the server: the trees ferry built by hand are valid.
		g.Run(t, "fsck", "--strict")
	}
}

// assertOnTop checks that commit's parent is the person's commit, that
// the person's note survived, and that the status files are ferry's.
func assertOnTop(t *testing.T, g *testenv.Git, commit, human string, sts []*status.PlanStatus) {
	t.Helper()
	if commit == "" {
		t.Fatal("no commit")
	}
	if got := g.Run(t, "rev-parse", "refs/heads/"+statusfile.DefaultBranch); got != commit {
		t.Fatalf("branch is at %s; want ferry's %s", got, commit)
	}
	if parents := g.Run(t, "log", "-1", "--format=%P", commit); parents != human {
		t.Errorf("ferry's commit has parents %q; want the person's %s", parents, human)
	}
	if note := g.Run(t, "show", commit+":NOTES.md"); note != "Do not touch the cloud until Monday." {
		t.Errorf("NOTES.md = %q; the person's change was lost", note)
	}
	for _, st := range sts {
		want, _ := statusfile.Encode(st)
		if got := g.Run(t, "show", commit+":status/"+st.Plan+".yaml"); got != strings.TrimSpace(string(want)) {
			t.Errorf("status/%s.yaml is not ferry's version:\n%s", st.Plan, got)
		}
	}
}

// ferryCommit asks the Git source, which ignores ferry's own commits,
// whether it takes commit for one.
func ferryCommit(t *testing.T, url, commit string) bool {
	t.Helper()
	src, err := gitsource.New(gitsource.Config{URL: url, Branch: statusfile.DefaultBranch, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := src.Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	c, err := src.Commit(gitsource.Revision(commit))
	if err != nil {
		t.Fatal(err)
	}
	return gitsource.IsFerryCommit(c)
}

// TestGitStatusStoreRedacts: a credential in the URL never shows in an error.
func TestGitStatusStoreRedacts(t *testing.T) {
	for _, url := range []string{
		"http://alice:s3cret-token@127.0.0.1:1/plans.git",
		"http://s3cret-token@127.0.0.1:1/plans.git",
	} {
		w := gitStore(url, "")
		_, err := w.Write(t.Context(), statusesOf("normal"))
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Write to %s: %v; want an error without the credential", gitsource.RedactURL(url), err)
		}
		if _, err := w.Read(t.Context(), "normal"); err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Read from %s: %v; want an error without the credential", gitsource.RedactURL(url), err)
		}
	}
}

// TestGitStatusStoreSSH pushes statuses to an ssh remote with the key and
// known_hosts the Git source reads it with (the writer was given only a
// token before, so over ssh it ignored both); another host key, another
// client key or a missing key fails, naming the problem.
func TestGitStatusStoreSSH(t *testing.T) {
	g := testenv.StartGit(t, seed)
	s := testenv.StartSSHGit(t, g)
	ctx := t.Context()
	w := GitStatusStore{Git: &gitsource.Branch{URL: s.URL, Name: statusfile.DefaultBranch, CacheDir: t.TempDir(), Auth: gitsource.Auth{SSHKeyFile: s.KeyFile, KnownHostsFile: s.KnownHosts}}}
	commit, err := w.Write(ctx, statusesOf("normal"))
	if err != nil {
		t.Fatalf("write over ssh: %v", err)
	}
	if got := g.Run(t, "rev-parse", "refs/heads/"+statusfile.DefaultBranch); got != commit {
		t.Fatalf("server's %s is %s; want the commit pushed over ssh, %s", statusfile.DefaultBranch, got, commit)
	}
	if st, err := w.Read(ctx, "normal"); err != nil || st.Plan != "normal" {
		t.Fatalf("read back over ssh: %+v, %v", st, err)
	}

	other := testenv.StartSSHGit(t, g) // another host key, another client key
	for _, tc := range []struct {
		name string
		auth gitsource.Auth
		want string
	}{
		{"another host's known_hosts", gitsource.Auth{SSHKeyFile: s.KeyFile, KnownHostsFile: other.KnownHosts}, "knownhosts"},
		{"a key the server does not know", gitsource.Auth{SSHKeyFile: other.KeyFile, KnownHostsFile: s.KnownHosts}, "unable to authenticate"},
		{"no key", gitsource.Auth{KnownHostsFile: s.KnownHosts}, "needs an SSH key file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := GitStatusStore{Git: &gitsource.Branch{URL: s.URL, Name: statusfile.DefaultBranch, Auth: tc.auth}}
			if _, err := w.Write(ctx, statusesOf("failed")); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("write: %v; want an error saying %q", err, tc.want)
			}
		})
	}
	if got := g.Run(t, "rev-parse", "refs/heads/"+statusfile.DefaultBranch); got != commit {
		t.Errorf("a refused write moved %s to %s", statusfile.DefaultBranch, got)
	}
}
