package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/testing/fakegithub"
)

func TestUpsertCommentCreatesEditsAndSkips(t *testing.T) {
	ctx := context.Background()
	f := newFakeGitHub(t)
	f.AddPR(fakegithub.PR{Number: 7, State: "open", Head: "aaa", Base: "main"})
	other := f.AddComment(7, "alice", "LGTM, but what will ferry do?")
	g := client(t, f)
	const key = "plan/capi-quickstart"

	if err := g.UpsertComment(ctx, 7, key, Comment(key, "Preview", "step 1")); err != nil {
		t.Fatal(err)
	}
	cs := f.Comments(7)
	if len(cs) != 2 || cs[1].Login != bot || !strings.HasPrefix(cs[1].Body, Marker(key)) {
		t.Fatalf("after the first upsert: %+v", cs)
	}
	id := cs[1].ID

	if err := g.UpsertComment(ctx, 7, key, Comment(key, "Preview", "step 1\nstep 2")); err != nil {
		t.Fatal(err)
	}
	cs = f.Comments(7)
	if len(cs) != 2 || cs[1].ID != id || !strings.Contains(cs[1].Body, "step 2") {
		t.Fatalf("the second upsert did not edit comment %d in place: %+v", id, cs)
	}
	if cs[0].ID != other || cs[0].Body != "LGTM, but what will ferry do?" {
		t.Errorf("someone else's comment was changed: %+v", cs[0])
	}

	before := len(f.Calls(""))
	if err := g.UpsertComment(ctx, 7, key, Comment(key, "Preview", "step 1\nstep 2")); err != nil {
		t.Fatal(err)
	}
	if n := len(f.Calls("")) - before; n != 0 {
		t.Errorf("an unchanged body cost %d requests, want 0", n)
	}
	if got := len(f.Calls(http.MethodPost)); got != 1 {
		t.Errorf("%d comments created, want 1", got)
	}
	if got := len(f.Calls(http.MethodPatch)); got != 1 {
		t.Errorf("%d comment edits, want 1", got)
	}
	s := g.Stats()
	if s.CommentsCreated != 1 || s.CommentsEdited != 1 || s.CommentsUnchanged != 1 {
		t.Errorf("stats %+v", s)
	}
}

// A restarted reconciler finds its comment by the marker, past the first
// page, and leaves other comments alone, even one that mentions the marker.
func TestUpsertCommentFindsExistingByMarker(t *testing.T) {
	ctx := context.Background()
	f := newFakeGitHub(t)
	f.AddPR(fakegithub.PR{Number: 3, State: "open", Head: "aaa", Base: "main"})
	const key = "plan/prod"
	quoted := f.AddComment(3, "bob", "> ferry said:\n> "+Marker(key)+"\nwhy?")
	for i := range 140 {
		f.AddComment(3, "alice", fmt.Sprintf("comment %d", i))
	}
	body := Comment(key, "Progress", "running")
	mine := f.AddComment(3, bot, body)
	f.AddComment(3, "bob", Marker("plan/other")+"\nnot this key")

	g := client(t, f)
	if err := g.UpsertComment(ctx, 3, key, body); err != nil {
		t.Fatal(err)
	}
	if n := len(f.Calls(http.MethodPatch)) + len(f.Calls(http.MethodPost)); n != 0 {
		t.Errorf("an unchanged body found on page 2 caused %d writes", n)
	}
	if n := len(f.Calls(http.MethodGet)); n != 2 {
		t.Errorf("%d list requests, want 2 pages", n)
	}
	if err := g.UpsertComment(ctx, 3, key, Comment(key, "Progress", "done")); err != nil {
		t.Fatal(err)
	}
	edits := f.Calls(http.MethodPatch)
	if len(edits) != 1 || !strings.HasSuffix(edits[0].Path, fmt.Sprintf("/issues/comments/%d", mine)) {
		t.Fatalf("edits %+v, want one of comment %d", edits, mine)
	}
	for _, c := range f.Comments(3) {
		if c.ID == quoted && !strings.HasSuffix(c.Body, "why?") {
			t.Errorf("a quote of the marker was edited: %q", c.Body)
		}
	}
}

func TestUpsertCommentRecreatesDeletedComment(t *testing.T) {
	ctx := context.Background()
	f := newFakeGitHub(t)
	f.AddPR(fakegithub.PR{Number: 5, State: "open", Head: "aaa", Base: "main"})
	g := client(t, f)
	if err := g.UpsertComment(ctx, 5, "k", "first"); err != nil {
		t.Fatal(err)
	}
	f.DeleteComment(f.Comments(5)[0].ID)
	if err := g.UpsertComment(ctx, 5, "k", "second"); err != nil {
		t.Fatal(err)
	}
	cs := f.Comments(5)
	if len(cs) != 1 || cs[0].Body != Marker("k")+"\nsecond" {
		t.Errorf("comments %+v", cs)
	}
}

func TestUpsertCommentTruncatesLongBody(t *testing.T) {
	ctx := context.Background()
	f := newFakeGitHub(t)
	f.AddPR(fakegithub.PR{Number: 9, State: "open", Head: "aaa", Base: "main"})
	g := client(t, f)
	const key = "plan/big"
	var b strings.Builder
	for b.Len() < 70000 {
		fmt.Fprintf(&b, "step %05d: patch OpenStackMachineTemplate\n", b.Len())
	}
	body := Comment(key, "Progress", "```\n"+b.String()+"```")
	if len(body) < 70000 {
		t.Fatalf("test body is only %d characters", len(body))
	}
	if err := g.UpsertComment(ctx, 9, key, body); err != nil {
		t.Fatal(err)
	}
	got := f.Comments(9)[0].Body
	if len(got) >= MaxCommentLength {
		t.Errorf("posted %d characters, want under %d", len(got), MaxCommentLength)
	}
	if !strings.HasPrefix(got, Marker(key)+"\n") {
		t.Errorf("marker lost: %.80q", got)
	}
	if !strings.Contains(got, "ferry cut this comment") || !strings.Contains(got, "```\n\n> [!NOTE]") {
		t.Errorf("no note after a closed code block: %q", got[len(got)-300:])
	}
	// The same long body again: recognised as unchanged after the cut.
	if err := g.UpsertComment(ctx, 9, key, body); err != nil {
		t.Fatal(err)
	}
	if n := len(f.Calls(http.MethodPatch)); n != 0 {
		t.Errorf("%d edits for an unchanged long body", n)
	}
}

func TestUpsertCommentRejectsBadKey(t *testing.T) {
	f := newFakeGitHub(t)
	g := client(t, f)
	for _, key := range []string{"", "a-->b", "a b", "a\nb", "x--y"} {
		err := g.UpsertComment(context.Background(), 1, key, "body")
		if !failure.IsTerminal(err) {
			t.Errorf("key %q: err = %v, want terminal", key, err)
		}
	}
	if n := len(f.Calls("")); n != 0 {
		t.Errorf("bad keys cost %d requests", n)
	}
}

func TestSetStatus(t *testing.T) {
	ctx := context.Background()
	f := newFakeGitHub(t)
	g := client(t, f)
	long := strings.Repeat("é", 200)
	if err := g.SetStatus(ctx, "abc123", "ferry/plan/prod", StatePending, long, "https://ferry.example.com/plans/prod"); err != nil {
		t.Fatal(err)
	}
	calls := f.Calls(http.MethodPost)
	if len(calls) != 1 || calls[0].Path != "/api/v3/repos/ferry-dev/plans/statuses/abc123" {
		t.Fatalf("requests %+v", calls)
	}
	want := fakegithub.Status{SHA: "abc123", State: "pending", Context: "ferry/plan/prod",
		Description: strings.Repeat("é", 139) + "…", TargetURL: "https://ferry.example.com/plans/prod"}
	if got := f.Statuses()[0]; got != want {
		t.Errorf("status\n got %+v\nwant %+v", got, want)
	}
	if !strings.Contains(calls[0].Body, `"state":"pending"`) || !strings.Contains(calls[0].Body, `"context":"ferry/plan/prod"`) {
		t.Errorf("payload %s", calls[0].Body)
	}

	if err := g.SetStatus(ctx, "abc123", "ferry", "done", "", ""); !failure.IsTerminal(err) {
		t.Errorf("unknown state: err = %v, want terminal", err)
	}
	if err := g.SetStatus(ctx, "", "ferry", StateSuccess, "", ""); !failure.IsTerminal(err) {
		t.Errorf("empty sha: err = %v, want terminal", err)
	}
	if n := len(f.Calls("")); n != 1 {
		t.Errorf("invalid statuses were sent: %d requests", n)
	}
	if s := g.Stats(); s.StatusesSet != 1 || s.Requests != 1 || s.RateRemaining != 4999 {
		t.Errorf("stats %+v", s)
	}
}

func TestPullRequestsForCommit(t *testing.T) {
	ctx := context.Background()
	f := newFakeGitHub(t)
	f.AddPR(fakegithub.PR{Number: 12, State: "closed", Title: "Approve control-plane", Head: "head12", Base: "main",
		MergedAt: "2024-05-01T10:00:00Z", MergedBy: "carol", MergeCommitSHA: "merge12"})
	f.AddPR(fakegithub.PR{Number: 13, State: "open", Title: "Approve workers", Head: "head13", Base: "main"})
	f.LinkCommit("merge12", 12, 13)
	g := client(t, f)

	prs, err := g.PullRequestsForCommit(ctx, "merge12")
	if err != nil {
		t.Fatal(err)
	}
	want := []PullRequest{
		{Number: 12, State: "closed", Merged: true, MergedBy: "carol", HeadSHA: "head12", BaseRef: "main",
			MergeCommitSHA: "merge12", Title: "Approve control-plane", URL: "https://github.example.com/ferry-dev/plans/pull/12"},
		{Number: 13, State: "open", HeadSHA: "head13", BaseRef: "main",
			Title: "Approve workers", URL: "https://github.example.com/ferry-dev/plans/pull/13"},
	}
	if !slices.EqualFunc(prs, want, prEqual) {
		t.Fatalf("pull requests\n got %+v\nwant %+v", prs, want)
	}
	if pr, ok := ApprovingPullRequest(prs, "merge12", "main"); !ok || pr.MergedBy != "carol" {
		t.Errorf("approver = %+v, %v", pr, ok)
	}
	// merged_by is not in the list payload: it took the pull request itself.
	if n := len(f.Calls(http.MethodGet)); n != 2 {
		t.Errorf("%d requests, want the list and one pull request", n)
	}
	if _, err := g.PullRequestsForCommit(ctx, "merge12"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.Calls(http.MethodGet)); n != 3 {
		t.Errorf("asking again cost %d requests, want 1 (merged pull requests do not change)", n-2)
	}
	prs, err = g.PullRequestsForCommit(ctx, "unknown")
	if err != nil || len(prs) != 0 {
		t.Errorf("commit without pull requests: %v, %v", prs, err)
	}
}

func TestOpenPullRequests(t *testing.T) {
	ctx := context.Background()
	f := newFakeGitHub(t)
	var many []fakegithub.File
	for i := range 130 {
		many = append(many, fakegithub.File{Filename: fmt.Sprintf("docs/%03d.md", i), Status: "added"})
	}
	f.AddPR(fakegithub.PR{Number: 20, State: "open", Title: "Approve cluster", Head: "h20", Base: "main"},
		fakegithub.File{Filename: "plans/a.yaml", Status: "modified"},
		fakegithub.File{Filename: "plans/b.yaml", Status: "renamed", PreviousFilename: "plans/old-b.yaml"})
	f.AddPR(fakegithub.PR{Number: 21, State: "open", Title: "Docs", Head: "h21", Base: "main"}, many...)
	f.AddPR(fakegithub.PR{Number: 19, State: "closed", Title: "Old", Head: "h19", Base: "main", MergedAt: "2024-04-01T00:00:00Z", MergedBy: "dave"})
	g := client(t, f)

	prs, err := g.OpenPullRequests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(prs) != 2 || prs[0].Number != 20 || prs[1].Number != 21 {
		t.Fatalf("open pull requests %+v", prs)
	}
	if want := []string{"plans/a.yaml", "plans/b.yaml", "plans/old-b.yaml"}; !slices.Equal(prs[0].Files, want) {
		t.Errorf("files of #20 = %v, want %v", prs[0].Files, want)
	}
	if len(prs[1].Files) != 130 || prs[1].Files[129] != "docs/129.md" {
		t.Errorf("#21 has %d files, want 130 over two pages", len(prs[1].Files))
	}
	if n := len(f.Calls(http.MethodGet)); n != 4 {
		t.Errorf("%d requests, want 4 (list, files of #20, two pages of #21)", n)
	}

	// Nothing moved: one request. #20's head moved: its files again.
	if _, err := g.OpenPullRequests(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(f.Calls(http.MethodGet)); n != 5 {
		t.Errorf("a poll with nothing new cost %d requests, want 1", n-4)
	}
	f.Push(20, "h20b", fakegithub.File{Filename: "plans/c.yaml", Status: "added"})
	prs, err = g.OpenPullRequests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(prs[0].Files, []string{"plans/c.yaml"}) || prs[0].HeadSHA != "h20b" {
		t.Errorf("after a push to #20: %+v", prs[0])
	}
}

func TestEnterpriseBaseURL(t *testing.T) {
	f := newFakeGitHub(t)
	f.AddPR(fakegithub.PR{Number: 1, State: "open", Head: "h", Base: "main"})
	g := client(t, f)
	if got, want := g.BaseURL(), f.URL+"/api/v3/"; got != want {
		t.Errorf("BaseURL = %s, want %s", got, want)
	}
	ctx := context.Background()
	if _, err := g.OpenPullRequests(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.UpsertComment(ctx, 1, "k", "b"); err != nil {
		t.Fatal(err)
	}
	if err := g.SetStatus(ctx, "h", "ferry", StateSuccess, "", ""); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Calls("") {
		if !strings.HasPrefix(r.Path, "/api/v3/repos/ferry-dev/plans/") {
			t.Errorf("%s %s is not under /api/v3/", r.Method, r.Path)
		}
	}

	dotcom, err := New("o", "r", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := dotcom.BaseURL(); got != "https://api.github.com/" {
		t.Errorf("default BaseURL = %s", got)
	}
	if _, err := New("", "r", "", ""); !failure.IsTerminal(err) {
		t.Errorf("New without owner: %v", err)
	}
}

func TestErrorsAreTyped(t *testing.T) {
	ctx := context.Background()
	f := newFakeGitHub(t)
	g := client(t, f)

	f.Fail(http.MethodPost, "/statuses/s1", http.StatusInternalServerError, nil, `{"message":"Server Error"}`)
	err := g.SetStatus(ctx, "s1", "c", StateSuccess, "", "")
	if err == nil || failure.IsTerminal(err) {
		t.Errorf("500: err = %v, want retryable", err)
	}
	if _, limited := RetryAfter(err); limited {
		t.Errorf("500 taken for a rate limit")
	}

	f.Fail(http.MethodPost, "/statuses/s1", http.StatusBadGateway, map[string]string{"Content-Type": "text/html"}, `<html>502 Bad Gateway</html>`)
	if err := g.SetStatus(ctx, "s1", "c", StateSuccess, "", ""); err == nil || failure.IsTerminal(err) {
		t.Errorf("502 with an HTML body: err = %v, want retryable", err)
	}

	f.Fail(http.MethodPost, "/statuses/s1", http.StatusTooManyRequests, map[string]string{"Retry-After": "30"},
		`{"message":"You have exceeded a secondary rate limit."}`)
	err = g.SetStatus(ctx, "s1", "c", StateSuccess, "", "")
	if d, limited := RetryAfter(err); !limited || d < 29e9 || d > 30e9 || failure.IsTerminal(err) {
		t.Errorf("429: RetryAfter = %v, %v; terminal %v", d, limited, failure.IsTerminal(err))
	}

	f.Fail(http.MethodPost, "/statuses/s1", http.StatusForbidden, nil,
		`{"message":"Resource not accessible by integration","documentation_url":"https://docs.github.com/rest"}`)
	err = g.SetStatus(ctx, "s1", "c", StateSuccess, "", "")
	if !failure.IsTerminal(err) || !strings.Contains(err.Error(), "set status c on s1 in ferry-dev/plans") {
		t.Errorf("403 without a rate limit: err = %v, want terminal and named", err)
	}

	bad, _ := New(f.Owner, f.Repo, "wrong-token", f.URL)
	err = bad.SetStatus(ctx, "s1", "c", StateSuccess, "", "")
	if !failure.IsTerminal(err) || strings.Contains(err.Error(), "wrong-token") {
		t.Errorf("401: err = %v, want terminal without the token", err)
	}
	if s := g.Stats(); s.RateLimited != 1 || s.ServerErrors != 2 || s.Requests != 4 {
		t.Errorf("stats %+v", s)
	}
}

func TestTokenFromFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	if err := os.WriteFile(path, []byte("ghp_secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, err := TokenFromFile(path); err != nil || tok != "ghp_secret" {
		t.Errorf("TokenFromFile = %q, %v", tok, err)
	}
	t.Setenv(TokenEnv, " ghp_from_env ")
	if tok, err := TokenFromFile(""); err != nil || tok != "ghp_from_env" {
		t.Errorf("from $%s: %q, %v", TokenEnv, tok, err)
	}
	t.Setenv(TokenEnv, "")
	if _, err := TokenFromFile(""); err == nil {
		t.Errorf("no file and no variable: no error")
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := TokenFromFile(empty); err == nil {
		t.Errorf("empty file: no error")
	}
	if _, err := TokenFromFile(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func prEqual(a, b PullRequest) bool {
	return a.Number == b.Number && a.State == b.State && a.Merged == b.Merged && a.MergedBy == b.MergedBy &&
		a.HeadSHA == b.HeadSHA && a.BaseRef == b.BaseRef && a.MergeCommitSHA == b.MergeCommitSHA &&
		a.Title == b.Title && a.URL == b.URL && slices.Equal(a.Files, b.Files)
}

// Permission folds GitHub's answer into four values; an unknown account is
// none. PullRequestComments lists everyone's comments with their authors.
func TestPermissionAndComments(t *testing.T) {
	ctx := context.Background()
	f := newFakeGitHub(t)
	f.SetPermission("alice", "write")
	f.SetPermission("mallory", "read")
	f.SetPermission("root", "admin")
	f.AddPR(fakegithub.PR{Number: 4, State: "open", Head: "aaa", Base: "main"})
	f.AddComment(4, "alice", "/ferry retry")
	f.AddComment(4, "mallory", "/ferry retry")
	g := client(t, f)
	for login, want := range map[string]string{"alice": PermissionWrite, "mallory": PermissionRead, "root": PermissionAdmin, "ghost": PermissionNone} {
		if got, err := g.Permission(ctx, login); err != nil || got != want {
			t.Errorf("Permission(%s) = %q, %v; want %q", login, got, err, want)
		}
	}
	cs, err := g.PullRequestComments(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].Author != "alice" || cs[1].Author != "mallory" || cs[0].Body != "/ferry retry" || cs[0].ID == 0 || cs[0].Created.IsZero() {
		t.Errorf("comments %+v", cs)
	}
}
