package reconciler

import (
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/status"
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

// TestParseOwners: rules like CODEOWNERS', the last match winning (one
// without owners takes them away); each bad line is an error naming the
// file and the line.
func TestParseOwners(t *testing.T) {
	o, err := ParseOwners("owners", []byte(`# Who approves which plans.
plans/** alice   # every plan

/plans/prod-*.yaml @carol dave
plans/prod-lab.yaml
plans/team-a/ erin
`))
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		"plans/dev.yaml":          "alice",
		"plans/prod-eu.yaml":      "carol dave",
		"plans/prod-lab.yaml":     "",
		"plans/team-a/x/dev.yaml": "erin",
		"other/prod-eu.yaml":      "",
		"prod-eu.yaml":            "",
	} {
		if got := strings.Join(o.Of(file), " "); got != want {
			t.Errorf("owners of %s = %q; want %q", file, got, want)
		}
	}
	if o, err := ParseOwners("owners", nil); err != nil || o.Of("plans/dev.yaml") != nil {
		t.Errorf("an empty file: %v, %v; want no owners", o, err)
	}
	_, err = ParseOwners("deploy/owners", []byte(`plans/** alice
plans/** @acme/platform
*.yaml alice
plans/[.yaml alice
plans/**.yaml alice
plans/x.yaml alice@example.com
plans/x.yaml al!ce
`))
	for _, want := range []string{
		`deploy/owners:2: owner "@acme/platform": GitHub teams are not supported`,
		`deploy/owners:3: pattern "*.yaml": match the whole path from the repository's root, such as plans/*.yaml`,
		`deploy/owners:4: pattern "plans/[.yaml"`,
		`deploy/owners:5: pattern "plans/**.yaml"`,
		`deploy/owners:6: owner "alice@example.com": an email address`,
		`deploy/owners:7: owner "al!ce": not a login`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseOwners = %v; want an error with %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "owners:1:") {
		t.Errorf("ParseOwners = %v; want line 1 taken", err)
	}
}

// TestPolicyLacks: what an approval lacks of the review count and of the
// plan file's owners, logins compared regardless of case; nothing of a
// plan the owners do not name.
func TestPolicyLacks(t *testing.T) {
	owners, err := ParseOwners("owners", []byte("plans/prod-*.yaml Alice carol\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := Policy{Reviews: ReviewPolicy{"cleanup": 2}, Owners: owners}
	for _, tc := range []struct {
		file, phase string
		approvers   []string
		want        []string // in the sentences, in order
	}{
		{"plans/prod-eu.yaml", "workers", []string{"bob"}, []string{"plans/prod-eu.yaml is owned by Alice, carol (--owners-file): phase workers needs an approving review of #7's last commit by one of them, with write access and not its author; #7 has approving reviews by bob only"}},
		{"plans/prod-eu.yaml", "workers", nil, []string{"#7 has none"}},
		{"plans/prod-eu.yaml", status.RollbackApproval("cluster"), nil, []string{"spec.rollback to cluster needs an approving review"}},
		{"plans/prod-eu.yaml", "workers", []string{"bob", "alice"}, nil},
		{"plans/prod-eu.yaml", "cleanup", []string{"carol"}, []string{"phase cleanup needs 2 approving reviews of #7's last commit", "it has 1 (carol)"}},
		{"plans/prod-eu.yaml", "cleanup", []string{"bob"}, []string{"needs 2 approving reviews", "owned by Alice, carol"}},
		{"plans/dev.yaml", "workers", nil, nil},
	} {
		var got string
		for _, l := range p.lacks(tc.file, tc.phase, 7, tc.approvers) {
			got += l.why + "\n"
		}
		if (got == "") != (len(tc.want) == 0) {
			t.Errorf("%s, %s, approved by %v: lacks %q; want %q", tc.file, tc.phase, tc.approvers, got, tc.want)
		}
		rest := got
		for _, w := range tc.want {
			i := strings.Index(rest, w)
			if i < 0 {
				t.Errorf("%s, %s, approved by %v: lacks %q; want %q in it, in order", tc.file, tc.phase, tc.approvers, got, tc.want)
				break
			}
			rest = rest[i+len(w):]
		}
	}
}

// TestReviewPolicyOnGitHub: on the GitHub stand-in, a pull request that
// raises spec.approve to control-plane, where the policy asks for two
// approving reviews, fails the merge gate with one (an approval of an
// earlier commit, a reader's and the author's do not count) and passes
// with two; one that approves a phase the policy does not name needs none.
func TestReviewPolicyOnGitHub(t *testing.T) {
	gh, fg := reviewedPR(t)
	p := &Previews{Forge: fg, Policy: Policy{Reviews: ReviewPolicy{"control-plane": 2}}}
	pr := forge.PullRequest{Number: 5, Author: "alice", HeadSHA: "head5"}
	base := basePlans{byName: map[string]*v1alpha1.MigrationPlan{"capi-quickstart": testenv.ExamplePlanDecoded(t, "cluster")}}
	raise := func(phase string) *pullPlans {
		return &pullPlans{files: []changedFile{{path: quickstart, plan: testenv.ExamplePlanDecoded(t, phase)}}}
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

// TestOwnersOnGitHub: on the GitHub stand-in, a pull request that raises
// spec.approve of a plan whose file has owners, asks for its rollback, or
// changes it otherwise, fails the merge gate until an owner approves its last commit: not a
// writer who is no owner, nor an owner who may only read, nor the author
// (an owner too), nor an owner's approval of an earlier commit.
func TestOwnersOnGitHub(t *testing.T) {
	gh, fg := reviewedPR(t)
	owners, err := ParseOwners("owners", []byte("plans/** alice carol mallory\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := &Previews{Forge: fg, Policy: Policy{Owners: owners}}
	pr := forge.PullRequest{Number: 5, Author: "alice", HeadSHA: "head5"}
	base := basePlans{byName: map[string]*v1alpha1.MigrationPlan{"capi-quickstart": testenv.ExamplePlanDecoded(t, "cluster")}}
	rollback := testenv.ExamplePlanDecoded(t, "cluster")
	rollback.Spec.Rollback = &v1alpha1.Rollback{To: "prepare"}
	changes := map[string]*pullPlans{
		"raise":    {files: []changedFile{{path: quickstart, plan: testenv.ExamplePlanDecoded(t, "control-plane")}}},
		"rollback": {files: []changedFile{{path: quickstart, plan: rollback}}},
		// A change that approves nothing new is the owners' to judge too.
		"change": {files: []changedFile{{path: quickstart, plan: testenv.ExamplePlanDecoded(t, "cluster")}}},
	}
	for what, pp := range changes {
		short, err := p.reviewShortfall(t.Context(), pr, pp, base)
		if err != nil || len(short) != 1 || !strings.Contains(short[0], "is owned by alice, carol, mallory (--owners-file)") || !strings.Contains(short[0], "#5 has approving reviews by bob only") {
			t.Errorf("%s, approved by bob alone among those that count: %q, %v; want the gate to say the owners and bob", what, short, err)
		}
	}
	other := &pullPlans{files: []changedFile{{path: "plans/other.yaml", plan: testenv.ExamplePlanDecoded(t, "cluster")}}}
	p.Policy.Owners, err = ParseOwners("owners", []byte("plans/capi-*.yaml alice carol mallory\n"))
	if err != nil {
		t.Fatal(err)
	}
	if short, err := p.reviewShortfall(t.Context(), pr, other, base); err != nil || len(short) != 0 {
		t.Errorf("a plan nobody owns: %q, %v; want no reason", short, err)
	}
	gh.AddReview(5, fakegithub.Review{Login: "carol", State: "APPROVED", Commit: "head5"})
	for what, pp := range changes {
		if short, err := p.reviewShortfall(t.Context(), pr, pp, base); err != nil || len(short) != 0 {
			t.Errorf("%s, approved by the owner carol: %q, %v; want no reason", what, short, err)
		}
	}
}

// reviewedPR is the GitHub stand-in with alice's open pull request #5 at
// head5, where bob and carol may write and mallory may read, approved by
// bob, mallory and alice at head5 and by carol at head4 (before the last
// push): only bob's approval counts. It returns ferry's client too.
func reviewedPR(t *testing.T) (*fakegithub.Server, forge.Forge) {
	t.Helper()
	gh := fakegithub.New("ferry-dev", "plans", "token")
	t.Cleanup(gh.Close)
	gh.SetPermission("bob", forge.PermissionWrite)
	gh.SetPermission("carol", forge.PermissionWrite)
	gh.SetPermission("mallory", forge.PermissionRead)
	gh.AddPR(fakegithub.PR{Number: 5, State: "open", Head: "head5", Base: "main"})
	for _, r := range []fakegithub.Review{
		{Login: "bob", State: "APPROVED", Commit: "head5"},
		{Login: "carol", State: "APPROVED", Commit: "head4"},
		{Login: "mallory", State: "APPROVED", Commit: "head5"},
		{Login: "alice", State: "APPROVED", Commit: "head5"},
	} {
		gh.AddReview(5, r)
	}
	fg, err := forge.New(gh.Owner, gh.Repo, gh.Token, gh.URL)
	if err != nil {
		t.Fatal(err)
	}
	return gh, fg
}
