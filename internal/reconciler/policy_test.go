package reconciler

import (
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/testing/fakegithub"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestParseReviewPolicy: phase=count pairs; an unknown phase, a missing
// count or one out of range is refused, naming the pair.
func TestParseReviewPolicy(t *testing.T) {
	phases := []string{"cluster", "cutover", "cleanup"}
	p, err := ParseReviewPolicy(" cleanup=2, cutover=3 ,", phases)
	if err != nil || p.String() != "cleanup=2,cutover=3" {
		t.Errorf("policy = %v, %v", p, err)
	}
	if p, err := ParseReviewPolicy("", phases); err != nil || len(p) != 0 {
		t.Errorf("empty policy = %v, %v", p, err)
	}
	for in, want := range map[string]string{
		"cleanp=2":   `no phase "cleanp"`,
		"cleanup":    "want phase=count",
		"cleanup=0":  "from 1 to 10",
		"cleanup=x":  "from 1 to 10",
		"cleanup=11": "from 1 to 10",
	} {
		if _, err := ParseReviewPolicy(in, phases); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseReviewPolicy(%q) = %v; want an error with %q", in, err, want)
		}
	}
}

// TestReviewPolicyOnGitHub: on the GitHub stand-in, a pull request that
// raises spec.approve to control-plane, where the policy asks for two
// approving reviews, fails the merge gate with one (an approval of an
// earlier commit, a reader's and the author's do not count) and passes
// with two; one that approves a phase the policy does not name needs none.
func TestReviewPolicyOnGitHub(t *testing.T) {
	gh := fakegithub.New("ferry-dev", "plans", "token")
	t.Cleanup(gh.Close)
	gh.SetPermission("bob", forge.PermissionWrite)
	gh.SetPermission("carol", forge.PermissionWrite)
	gh.SetPermission("mallory", forge.PermissionRead)
	gh.AddPR(fakegithub.PR{Number: 5, State: "open", Head: "head5", Base: "main"})
	fg, err := forge.New(gh.Owner, gh.Repo, gh.Token, gh.URL)
	if err != nil {
		t.Fatal(err)
	}
	p := &Previews{Forge: fg, Policy: ReviewPolicy{"control-plane": 2}}
	pr := forge.PullRequest{Number: 5, Author: "alice", HeadSHA: "head5"}
	base := basePlans{byName: map[string]*v1alpha1.MigrationPlan{"capi-quickstart": testenv.ExamplePlanDecoded(t, "cluster")}}
	raise := func(phase string) *pullPlans {
		return &pullPlans{files: []changedFile{{path: quickstart, plan: testenv.ExamplePlanDecoded(t, phase)}}}
	}
	for _, r := range []fakegithub.Review{
		{Login: "bob", State: "APPROVED", Commit: "head5"},
		{Login: "carol", State: "APPROVED", Commit: "head4"},
		{Login: "mallory", State: "APPROVED", Commit: "head5"},
		{Login: "alice", State: "APPROVED", Commit: "head5"},
	} {
		gh.AddReview(5, r)
	}
	short, err := p.reviewShortfall(t.Context(), pr, raise("control-plane"), base)
	if err != nil || len(short) != 1 || !strings.Contains(short[0], "needs 2 approving reviews") || !strings.Contains(short[0], "it has 1 (bob)") {
		t.Errorf("one review that counts: %q, %v; want the gate to say 1 of 2 (bob)", short, err)
	}
	if short, err := p.reviewShortfall(t.Context(), pr, raise("cluster"), basePlans{byName: map[string]*v1alpha1.MigrationPlan{}}); err != nil || len(short) != 0 {
		t.Errorf("a phase the policy does not name: %q, %v; want no reason", short, err)
	}
	gh.AddReview(5, fakegithub.Review{Login: "carol", State: "APPROVED", Commit: "head5"})
	if short, err := p.reviewShortfall(t.Context(), pr, raise("control-plane"), base); err != nil || len(short) != 0 {
		t.Errorf("two reviews that count: %q, %v; want no reason", short, err)
	}
}
