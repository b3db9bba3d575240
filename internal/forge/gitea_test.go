package forge_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestGitea runs forge.Gitea against a real Gitea server and reads every
// end state back through Gitea's API.
func TestGitea(t *testing.T) {
	g := testenv.StartGitea(t, testenv.SeedDir(t, map[string]string{"plans/capi.yaml": "spec: {}\n"}))
	ctx := t.Context()
	client := newGitea(t, g, g.Token(testenv.GiteaBot))

	t.Run("comment upsert edits in place", func(t *testing.T) {
		head := g.PushBranch(t, testenv.GiteaMaintainer, "comments", "Raise approve", map[string]string{"plans/capi.yaml": "spec: {approve: one}\n"})
		pr := g.OpenPullRequest(t, testenv.GiteaMaintainer, "comments", "Approve one")
		other := g.Comment(t, testenv.GiteaReader, pr, "what will ferry do?")
		const key = "plan/capi"
		if err := client.UpsertComment(ctx, pr, key, forge.Comment(key, "Preview", "step 1")); err != nil {
			t.Fatal(err)
		}
		first := ferryComments(t, g, pr, key)
		if len(first) != 1 {
			t.Fatalf("after the first upsert, ferry's comments %+v", first)
		}
		if err := client.UpsertComment(ctx, pr, key, forge.Comment(key, "Preview", "step 1\nstep 2")); err != nil {
			t.Fatal(err)
		}
		// A restarted reconciler finds its comment by the marker.
		if err := newGitea(t, g, g.Token(testenv.GiteaBot)).UpsertComment(ctx, pr, key, forge.Comment(key, "Preview", "step 1\nstep 2\nstep 3")); err != nil {
			t.Fatal(err)
		}
		after := ferryComments(t, g, pr, key)
		if len(after) != 1 || after[0].ID != first[0].ID || !strings.Contains(after[0].Body, "step 3") || after[0].User.Login != testenv.GiteaBot {
			t.Fatalf("not edited in place: before %+v, after %+v", first, after)
		}
		cs := g.Comments(t, pr)
		if len(cs) != 2 || cs[0].ID != other || cs[0].Body != "what will ferry do?" {
			t.Errorf("comments on #%d: %+v", pr, cs)
		}
		got, err := client.PullRequestComments(ctx, pr)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Author != testenv.GiteaReader || got[0].ID != other || got[1].Author != testenv.GiteaBot || got[0].Created.IsZero() {
			t.Errorf("PullRequestComments = %+v", got)
		}

		t.Run("status", func(t *testing.T) {
			if err := client.SetStatus(ctx, head, "ferry/preview", forge.StatePending, "previewing", ""); err != nil {
				t.Fatal(err)
			}
			long := strings.Repeat("x", 200)
			if err := client.SetStatus(ctx, head, "ferry/preview", forge.StateSuccess, long, "https://ferry.invalid/p/1"); err != nil {
				t.Fatal(err)
			}
			ss := g.Statuses(t, head)
			if len(ss) != 1 {
				t.Fatalf("statuses on the head: %+v, want one context", ss)
			}
			newest := ss[0]
			if newest.Context != "ferry/preview" || newest.Status != "success" || newest.TargetURL != "https://ferry.invalid/p/1" ||
				len([]rune(newest.Description)) != forge.MaxStatusDescription {
				t.Errorf("newest status %+v", newest)
			}
			err := client.SetStatus(ctx, strings.Repeat("0", 40), "ferry/preview", forge.StateSuccess, "", "")
			if err == nil || !failure.IsTerminal(err) {
				t.Errorf("status of a commit Gitea does not have: %v, want a terminal error", err)
			}
		})
	})

	t.Run("a reader's comment with ferry's marker is not ferry's", func(t *testing.T) {
		if login, err := client.Login(ctx); err != nil || login != testenv.GiteaBot {
			t.Fatalf("Login = %q, %v; want %q", login, err, testenv.GiteaBot)
		}
		g.PushBranch(t, testenv.GiteaMaintainer, "forged", "Raise approve", map[string]string{"plans/capi.yaml": "spec: {approve: forged}\n"})
		pr := g.OpenPullRequest(t, testenv.GiteaMaintainer, "forged", "Approve forged")
		// The reader writes, before ferry does, the very comment ferry is
		// about to write: found as ferry's, it would stand in for it
		// (nothing sent, the body already there), and the next body would
		// be edited into the reader's comment (ferry's account is an admin,
		// which Gitea lets edit anyone's comment).
		const key = "plan/capi"
		forged := forge.Comment(key, "Preview", "step 1")
		planted := g.Comment(t, testenv.GiteaReader, pr, forged)
		fresh := newGitea(t, g, g.Token(testenv.GiteaBot)) // as after a restart: nothing remembered
		if err := fresh.UpsertComment(ctx, pr, key, forged); err != nil {
			t.Fatal(err)
		}
		if err := fresh.UpsertComment(ctx, pr, key, forge.Comment(key, "Preview", "step 1\nstep 2")); err != nil {
			t.Fatal(err)
		}
		if err := newGitea(t, g, g.Token(testenv.GiteaBot)).UpsertComment(ctx, pr, key, forge.Comment(key, "Preview", "step 1\nstep 2\nstep 3")); err != nil {
			t.Fatal(err)
		}
		cs := g.Comments(t, pr)
		if len(cs) != 2 || cs[0].ID != planted || cs[0].User.Login != testenv.GiteaReader || cs[0].Body != forged {
			t.Fatalf("comments on #%d: %+v; want the reader's first, untouched", pr, cs)
		}
		if cs[1].User.Login != testenv.GiteaBot || !strings.HasPrefix(cs[1].Body, forge.Marker(key)) || !strings.Contains(cs[1].Body, "step 3") {
			t.Errorf("ferry's comment on #%d: %+v; want one by %s with the latest body", pr, cs[1], testenv.GiteaBot)
		}
	})

	t.Run("pull requests of commits, by merge style", func(t *testing.T) {
		for _, style := range []string{testenv.MergeCommit, testenv.MergeSquash, testenv.MergeRebase} {
			t.Run(style, func(t *testing.T) {
				branch := "approve-" + style
				head := g.PushBranch(t, testenv.GiteaMaintainer, branch, "Approve "+style, map[string]string{"plans/" + style + ".yaml": "spec: {approve: one}\n"})
				n := g.OpenPullRequest(t, testenv.GiteaMaintainer, branch, "Approve "+style)
				prs, err := client.PullRequestsForCommit(ctx, head)
				if err != nil {
					t.Fatal(err)
				}
				if len(prs) != 1 || prs[0].Number != n || prs[0].Merged || prs[0].State != "open" {
					t.Errorf("before the merge, pull requests of the head %s: %+v", head, prs)
				}
				sha := g.MergePullRequest(t, testenv.GiteaMaintainer, n, style)
				prs, err = client.PullRequestsForCommit(ctx, sha)
				if err != nil {
					t.Fatal(err)
				}
				pr, ok := forge.ApprovingPullRequest(prs, sha, "main")
				if !ok || pr.Number != n || pr.MergedBy != testenv.GiteaMaintainer || pr.MergeCommitSHA != sha || pr.State != "closed" || pr.BaseRef != "main" {
					t.Errorf("pull requests of the %s commit %s: %+v", style, sha, prs)
				}
			})
		}
	})

	t.Run("open pull requests with files", func(t *testing.T) {
		g.PushBranch(t, testenv.GiteaMaintainer, "files", "Two plans", map[string]string{
			"plans/a.yaml": "spec: {}\n", "plans/b.yaml": "spec: {}\n", "plans/capi.yaml": "",
		})
		n := g.OpenPullRequest(t, testenv.GiteaMaintainer, "files", "Two plans")
		prs, err := client.OpenPullRequests(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(prs, func(p forge.PullRequest) bool { return p.Number == n })
		if i < 0 {
			t.Fatalf("#%d not among the open pull requests %+v", n, prs)
		}
		files := slices.Sorted(slices.Values(prs[i].Files))
		if want := []string{"plans/a.yaml", "plans/b.yaml", "plans/capi.yaml"}; !slices.Equal(files, want) {
			t.Errorf("files of #%d = %v, want %v", n, files, want)
		}
		if prs[i].HeadSHA == "" || prs[i].BaseRef != "main" || !strings.Contains(prs[i].URL, fmt.Sprintf("/pulls/%d", n)) {
			t.Errorf("#%d = %+v", n, prs[i])
		}
	})

	t.Run("permission", func(t *testing.T) {
		for login, want := range map[string]string{
			testenv.GiteaBot: forge.PermissionAdmin, testenv.GiteaMaintainer: forge.PermissionWrite,
			testenv.GiteaReader: forge.PermissionRead, "nobody-at-all": forge.PermissionNone,
		} {
			got, err := client.Permission(ctx, login)
			if err != nil || got != want {
				t.Errorf("Permission(%s) = %q, %v; want %q", login, got, err, want)
			}
		}
	})

	t.Run("errors", func(t *testing.T) {
		const bad = "0123456789abcdef0123456789abcdef01234567"
		err := newGitea(t, g, bad).UpsertComment(ctx, 1, "k", "body")
		if err == nil || !failure.IsTerminal(err) || strings.Contains(err.Error(), bad) {
			t.Errorf("a wrong token: %v; want a terminal error without the token", err)
		}
		other, err := forge.NewGitea(g.Owner, "missing", g.Token(testenv.GiteaBot), g.URL)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.OpenPullRequests(ctx); err == nil || !failure.IsTerminal(err) || strings.Contains(err.Error(), g.Token(testenv.GiteaBot)) {
			t.Errorf("a missing repository: %v; want a terminal error without the token", err)
		}
		// A forge that is down is worth retrying.
		g.Stop()
		_, err = client.OpenPullRequests(ctx)
		g.Start(t)
		if err == nil || failure.IsTerminal(err) || errors.Is(err, context.Canceled) {
			t.Errorf("Gitea down: %v; want an error worth retrying", err)
		}
		if _, err := client.OpenPullRequests(ctx); err != nil {
			t.Errorf("after Gitea came back: %v", err)
		}
	})
}

func newGitea(t *testing.T, g *testenv.Gitea, token string) *forge.Gitea {
	t.Helper()
	c, err := forge.NewGitea(g.Owner, g.Repo, token, g.URL)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ferryComments reads back the comments on pr that carry key's marker.
func ferryComments(t *testing.T, g *testenv.Gitea, pr int, key string) []testenv.GiteaComment {
	t.Helper()
	var mine []testenv.GiteaComment
	for _, c := range g.Comments(t, pr) {
		if strings.HasPrefix(c.Body, forge.Marker(key)) {
			mine = append(mine, c)
		}
	}
	return mine
}
