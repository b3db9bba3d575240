package reconciler

import (
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestPreviewCommandOnGitea: `/ferry preview` written on an open pull
// request of a real Gitea redoes its preview once, when its author may
// write to the repository; a reader's is answered with a refusal and
// redoes nothing. Both are answered once, also by a second Commands (a
// reconciler restarted) that reads the same comments: the answers are
// found by their markers on the forge, not in memory, and only in ferry's
// own comments: the reader's forged answer to the maintainer's command,
// marker and all, neither stops it nor is edited into ferry's answer.
func TestPreviewCommandOnGitea(t *testing.T) {
	ctx := t.Context()
	g := testenv.StartGitea(t, "")
	fg, err := forge.NewGitea(g.Owner, g.Repo, g.Token(testenv.GiteaBot), g.URL)
	if err != nil {
		t.Fatal(err)
	}
	g.PushBranch(t, testenv.GiteaMaintainer, "approve-cluster", "Approve cluster", map[string]string{quickstart: testenv.ExamplePlan(t, "cluster")})
	pr := g.OpenPullRequest(t, testenv.GiteaMaintainer, "approve-cluster", "Approve cluster")
	readers := g.Comment(t, testenv.GiteaReader, pr, "/ferry preview")
	maintainers := g.Comment(t, testenv.GiteaMaintainer, pr, "/ferry preview")
	forgedBody := forge.Comment(answerKey(maintainers), "", "@"+testenv.GiteaMaintainer+" `/ferry preview`: nothing to preview\n")
	forged := g.Comment(t, testenv.GiteaReader, pr, forgedBody)

	var previews []int
	newCommands := func() *Commands {
		return &Commands{Forge: fg, Open: func() []int { return []int{pr} },
			Preview: func(n int) { previews = append(previews, n) }, Every: time.Nanosecond}
	}
	first := newCommands()
	for range 2 {
		if err := first.Update(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := newCommands().Update(ctx); err != nil {
		t.Fatal(err)
	}
	if len(previews) != 1 || previews[0] != pr {
		t.Errorf("previews redone: %v; want #%d once (the maintainer's command, answered once across a restart)", previews, pr)
	}
	answers := map[string]int{}
	for _, c := range g.Comments(t, pr) {
		if c.ID == forged {
			if c.User.Login != testenv.GiteaReader || c.Body != forgedBody {
				t.Errorf("the reader's forged answer became %+v", c)
			}
			continue
		}
		if c.User.Login != testenv.GiteaBot {
			continue
		}
		switch {
		case strings.HasPrefix(c.Body, forge.Marker(answerKey(readers))):
			answers["reader"]++
			if !strings.Contains(c.Body, "refused: commands need write access") {
				t.Errorf("the reader's command was answered %q; want a refusal", c.Body)
			}
		case strings.HasPrefix(c.Body, forge.Marker(answerKey(maintainers))):
			answers["maintainer"]++
			if !strings.Contains(c.Body, "the preview and `"+GateContext+"` are being redone") {
				t.Errorf("the maintainer's command was answered %q", c.Body)
			}
		}
	}
	if answers["reader"] != 1 || answers["maintainer"] != 1 {
		t.Errorf("answers on #%d: %v; want one to each command", pr, answers)
	}
}
