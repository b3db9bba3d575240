package forge

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ferry-dev/ferry/internal/testing/golden"
)

// The framing of a preview comment, byte for byte: the reconciler renders the
// body; Comment adds the marker, header and footer.
func TestCommentGolden(t *testing.T) {
	body := "```\n" +
		"Plan capi-quickstart: cluster default/capi-quickstart, strategy adopt, control plane KubeadmControlPlane\n" +
		"Approved up to: cluster\n\n" +
		"Steps of phase cluster:\n" +
		"  1. kube: pause Cluster default/capi-quickstart: nothing reconciles while ferry builds\n" +
		"  2. kube: create OpenStackCluster default/capi-quickstart: the cluster's OpenStack infrastructure\n\n" +
		"Next: 2 step(s) of phase cluster.\n" +
		"```\n\n"
	got := Comment("plan/capi-quickstart", "ferry preview:\n plans/capi-quickstart.yaml at 1a2b3c4", body)
	golden.Check(t, filepath.Join("testdata", "comment.golden"), []byte(got))
}

func TestTruncateComment(t *testing.T) {
	marker := Marker("k") + "\n"
	lines := func(n int, line string) string { return strings.Repeat(line+"\n", n) }
	for _, tc := range []struct {
		name, body string
		fence      string // the fence the cut must close, if any
	}{
		{name: "lines", body: marker + lines(3000, strings.Repeat("x", 30))},
		{name: "open code block", body: marker + "```\n" + lines(3000, strings.Repeat("y", 30)) + "```\n", fence: "```"},
		{name: "tilde block", body: marker + "~~~yaml\n" + lines(3000, strings.Repeat("z", 30)) + "~~~\n", fence: "~~~"},
		{name: "one long line", body: marker + strings.Repeat("ab", 40000)},
		{name: "multibyte line", body: marker + strings.Repeat("€", 30000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := truncateComment(tc.body, MaxCommentLength)
			if len(got) >= MaxCommentLength {
				t.Errorf("%d bytes, want under %d", len(got), MaxCommentLength)
			}
			if !strings.HasPrefix(got, marker) || !utf8.ValidString(got) {
				t.Errorf("marker lost or a character split: %.60q", got)
			}
			kept, note, ok := strings.Cut(got, "\n> [!NOTE]\n")
			if !ok || !strings.Contains(note, "more lines") {
				t.Fatalf("no note: %q", got[len(got)-200:])
			}
			if !strings.HasSuffix(kept, "\n") || !strings.HasPrefix(tc.body, strings.TrimSuffix(strings.TrimSuffix(kept, tc.fence+"\n"), "\n")) {
				t.Errorf("the kept part is not a prefix of the body cut at a line end")
			}
			if tc.fence != "" && !strings.HasSuffix(kept, "\n"+tc.fence+"\n") {
				t.Errorf("code block left open: %q", kept[len(kept)-80:])
			}
			if openFence(kept) != "" {
				t.Errorf("the kept part ends inside a code block")
			}
		})
	}
	short := marker + "short"
	if got := truncateComment(short, MaxCommentLength); got != short {
		t.Errorf("a short body was changed: %q", got)
	}
}

func TestFrameBodyAddsMarkerOnce(t *testing.T) {
	if got := frameBody("k", "hello"); got != "<!-- ferry:k -->\nhello" {
		t.Errorf("frameBody = %q", got)
	}
	framed := Comment("k", "T", "b")
	if got := frameBody("k", framed); got != framed {
		t.Errorf("a framed body was framed again: %q", got)
	}
	if got := Comment("k", " ", "### Own header\n"); !strings.HasPrefix(got, "<!-- ferry:k -->\n### Own header\n\n<sub>") {
		t.Errorf("a comment without a title: %q", got)
	}
}

func TestCheckKey(t *testing.T) {
	for key, ok := range map[string]bool{
		"plan/capi-quickstart": true, "status:prod_eu.1": true,
		"": false, "a b": false, "a-->": false, "x--y": false, "ü": false, "a\nb": false,
	} {
		if err := checkKey(key); (err == nil) != ok {
			t.Errorf("checkKey(%q) = %v", key, err)
		}
	}
}

func TestShorten(t *testing.T) {
	for in, want := range map[string]string{
		"":                       "",
		strings.Repeat("a", 140): strings.Repeat("a", 140),
		strings.Repeat("a", 141): strings.Repeat("a", 139) + "…",
		strings.Repeat("ß", 150): strings.Repeat("ß", 139) + "…",
	} {
		if got := shorten(in, MaxStatusDescription); got != want {
			t.Errorf("shorten(%d runes) = %d runes", utf8.RuneCountInString(in), utf8.RuneCountInString(got))
		}
	}
}

// TestApprovingPullRequest: only a pull request merged into the tracked
// branch approves; one merged into another branch does not, even when it
// is the one whose merge made the commit.
func TestApprovingPullRequest(t *testing.T) {
	prs := []PullRequest{
		{Number: 1, State: "open", BaseRef: "main"},
		{Number: 2, Merged: true, MergedBy: "bob", MergeCommitSHA: "other", BaseRef: "main"},
		{Number: 3, Merged: true, MergedBy: "carol", MergeCommitSHA: "sha", BaseRef: "main"},
		{Number: 4, Merged: true, MergedBy: "mallory", MergeCommitSHA: "scratch", BaseRef: "scratch"},
	}
	if pr, ok := ApprovingPullRequest(prs, "sha", "main"); !ok || pr.Number != 3 {
		t.Errorf("merge commit match: %+v %v", pr, ok)
	}
	if pr, ok := ApprovingPullRequest(prs, "inside", "main"); !ok || pr.Number != 2 {
		t.Errorf("first merged: %+v %v", pr, ok)
	}
	if _, ok := ApprovingPullRequest(prs[:1], "sha", "main"); ok {
		t.Errorf("an open pull request approved something")
	}
	if pr, ok := ApprovingPullRequest(prs[3:], "scratch", "main"); ok {
		t.Errorf("a pull request merged into branch scratch approved a commit of main: %+v", pr)
	}
	if _, ok := ApprovingPullRequest(prs[1:3], "sha", "release"); ok {
		t.Errorf("pull requests merged into main approved a commit of release")
	}
}
