package forge

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/testing/fakegithub"
)

// TestLogin: ferry's login is asked of GitHub once. An installation
// token's GET /user is refused and GraphQL's viewer names the app's bot; a
// person's token is named by GET /user; a token GitHub refuses gives a
// terminal error without the token in it.
func TestLogin(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		personal bool
		want     []string // the requests, method and path
	}{
		{"installation token", false, []string{"GET /api/v3/user", "POST /api/graphql"}},
		{"personal token", true, []string{"GET /api/v3/user"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeGitHub(t)
			if tc.personal {
				f.PersonalToken()
			}
			g, err := New(f.Owner, f.Repo, f.Token, f.URL)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if login, err := g.Login(ctx); err != nil || login != bot {
					t.Fatalf("Login = %q, %v; want %q", login, err, bot)
				}
			}
			var got []string
			for _, r := range f.Calls("") {
				got = append(got, r.Method+" "+r.Path)
			}
			if strings.Join(got, ", ") != strings.Join(tc.want, ", ") {
				t.Errorf("requests %q; want %q, once", got, tc.want)
			}
		})
	}
	f := newFakeGitHub(t)
	bad, err := New(f.Owner, f.Repo, "wrong-token", f.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Login(ctx); err == nil || !failure.IsTerminal(err) || strings.Contains(err.Error(), "wrong-token") {
		t.Errorf("a wrong token: %v; want a terminal error without the token", err)
	}
}

// TestUpsertCommentLeavesOthersMarkerAlone: a comment that someone else
// wrote with ferry's marker, before ferry, is not ferry's. ferry neither
// takes its body for its own (it would then send nothing) nor edits it; it
// writes its own comment and keeps to it.
func TestUpsertCommentLeavesOthersMarkerAlone(t *testing.T) {
	ctx := context.Background()
	f := newFakeGitHub(t)
	f.AddPR(fakegithub.PR{Number: 4, State: "open", Head: "aaa", Base: "main"})
	const key = "plan/prod"
	body := Comment(key, "Preview", "step 1")
	planted := f.AddComment(4, "mallory", body)
	g, err := New(f.Owner, f.Repo, f.Token, f.URL) // the login not known yet, as at start
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{body, Comment(key, "Preview", "step 1\nstep 2")} {
		if err := g.UpsertComment(ctx, 4, key, b); err != nil {
			t.Fatal(err)
		}
	}
	cs := f.Comments(4)
	if len(cs) != 2 || cs[0].ID != planted || cs[0].Login != "mallory" || cs[0].Body != body {
		t.Fatalf("comments %+v; want mallory's first, untouched", cs)
	}
	if cs[1].Login != bot || !strings.Contains(cs[1].Body, "step 2") {
		t.Errorf("ferry's comment %+v; want its own, with the latest body", cs[1])
	}
	for _, r := range f.Calls(http.MethodPatch) {
		if strings.HasSuffix(r.Path, fmt.Sprintf("/issues/comments/%d", planted)) {
			t.Errorf("mallory's comment was sent an edit: %s", r.Path)
		}
	}
}
