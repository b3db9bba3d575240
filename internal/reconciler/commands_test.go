package reconciler

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/testing/fakegithub"
)

func TestParseCommand(t *testing.T) {
	for body, want := range map[string][]string{
		"/ferry retry":                   {"retry"},
		"  /ferry   preview \nthanks":    {"preview"},
		"/ferry":                         {},
		"please /ferry retry":            nil,
		"/ferryretry":                    nil,
		"<!-- ferry:command/3 -->\n@x …": nil,
	} {
		got, ok := parseCommand(body)
		if ok != (want != nil) || (ok && !reflect.DeepEqual(got, want)) {
			t.Errorf("parseCommand(%q) = %q, %t; want %q", body, got, ok, want)
		}
	}
	if id, ok := answeredID("<!-- ferry:command/42 -->\n@alice `/ferry retry`: …"); !ok || id != 42 {
		t.Errorf("answeredID = %d, %t", id, ok)
	}
}

// TestApprovedPhases: each pull request approved the phases after the
// previous approval's, up to its own; a push approves none for a pull
// request, and a rollback's approval no phase to run.
func TestApprovedPhases(t *testing.T) {
	st := &status.PlanStatus{
		Phases: []status.PhaseStatus{{Name: "cluster"}, {Name: "control-plane"}, {Name: "workers"}, {Name: "rollout"}},
		ApprovedBy: []status.Approval{
			{Phase: "control-plane", By: "alice", PR: 3},
			{Phase: "workers", By: "bob"},
			{Phase: "rollback to cluster", By: "carol", PR: 9},
			{Phase: "rollout", By: "dan", PR: 5},
		},
	}
	want := map[int][]string{3: {"cluster", "control-plane"}, 5: {"rollout"}}
	if got := approvedPhases(st); !reflect.DeepEqual(got, want) {
		t.Errorf("approvedPhases = %v; want %v", got, want)
	}
}

// TestForgedAnswerOnGitHub: on GitHub (the stand-in, which answers for an
// App's installation token as GitHub does), a reader's comment carrying
// the marker of ferry's answer to a maintainer's `/ferry preview` does not
// stop ferry carrying it out and answering it, in a comment of its own.
func TestForgedAnswerOnGitHub(t *testing.T) {
	ctx := t.Context()
	gh := fakegithub.New("ferry-dev", "plans", "token")
	t.Cleanup(gh.Close)
	gh.AddPR(fakegithub.PR{Number: 6, State: "open", Head: "h6", Base: "main"})
	gh.SetPermission("alice", forge.PermissionWrite)
	gh.SetPermission("mallory", forge.PermissionRead)
	cmd := gh.AddComment(6, "alice", "/ferry preview")
	forged := forge.Comment(answerKey(cmd), "", "@alice `/ferry preview`: nothing to preview\n")
	gh.AddComment(6, "mallory", forged)
	fg, err := forge.New(gh.Owner, gh.Repo, gh.Token, gh.URL)
	if err != nil {
		t.Fatal(err)
	}
	var previews []int
	c := &Commands{Forge: fg, Open: func() []int { return []int{6} }, Preview: func(n int) { previews = append(previews, n) }}
	if err := c.Update(ctx); err != nil {
		t.Fatal(err)
	}
	if len(previews) != 1 {
		t.Errorf("previews redone: %v; want #6 once", previews)
	}
	cs := gh.Comments(6)
	if len(cs) != 3 || cs[1].Login != "mallory" || cs[1].Body != forged ||
		cs[2].Login != fakegithub.Bot || !strings.HasPrefix(cs[2].Body, forge.Marker(answerKey(cmd))) || !strings.Contains(cs[2].Body, "are being redone") {
		t.Errorf("comments on #6: %+v; want the command, the forgery untouched, and ferry's answer", cs)
	}
}
