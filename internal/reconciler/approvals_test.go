package reconciler

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestMergeGrace: an approving commit without a known merged pull request
// is asked about again for MergeGrace from when it was first seen, each
// commit on its own clock, and refused only after.
func TestMergeGrace(t *testing.T) {
	now := time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)
	g := &GitApprovals{MergeGrace: 30 * time.Second, Now: func() time.Time { return now }}
	if !g.withinGrace("a") {
		t.Fatal("a commit first seen now is not within the grace")
	}
	now = now.Add(20 * time.Second)
	if !g.withinGrace("a") || !g.withinGrace("b") {
		t.Error("20s after a was first seen, a or the new b is not within the grace")
	}
	now = now.Add(15 * time.Second)
	if g.withinGrace("a") {
		t.Error("35s after a was first seen it is still within a 30s grace")
	}
	if !g.withinGrace("b") {
		t.Error("b, first seen 15s ago, is not within the grace")
	}
	var pending errMergeNotRecorded
	if err := error(errMergeNotRecorded{commit: "0123456789abcdef"}); !errors.As(err, &pending) || err.Error() == "" {
		t.Errorf("errMergeNotRecorded = %v", err)
	}
}

// TestPushedApprovals: a commit pushed to the branch (no pull request)
// that raises spec.approve, on a real Git server. With a forge, it is no
// approval once the merge grace is over: Find names no approver and
// Verify refuses it, setting ferry/approval on the commit. With
// --allow-push-approvals, or without a forge, its author approves.
func TestPushedApprovals(t *testing.T) {
	ctx := t.Context()
	g := testenv.StartGit(t, testenv.SeedDir(t, map[string]string{quickstart: testenv.ExamplePlan(t, "cluster")}))
	src, err := gitsource.New(gitsource.Config{URL: g.URL, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rev, _, err := src.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	author := strings.TrimSpace(g.Run(t, "log", "-1", "--format=%an", "main"))
	later := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name      string
		forge     bool
		allowPush bool
		wantBy    string // "" when it is no approval
	}{
		{"forge", true, false, ""},
		{"forge, --allow-push-approvals", true, true, author},
		{"no forge", false, false, author},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fg := &forgeLog{comments: map[int]string{}, statuses: map[string]string{}}
			calls := 0
			ga := &GitApprovals{Source: src, AllowPush: tc.allowPush, MergeGrace: time.Minute,
				Now: func() time.Time { calls++; return later.Add(time.Duration(calls) * time.Minute) }}
			if tc.forge {
				ga.Forge = fg
			}
			a, findErr := ga.Find(ctx, string(rev), quickstart, "cluster")
			if findErr != nil {
				// The first look-up starts the grace; the next is past it.
				a, findErr = ga.Find(ctx, string(rev), quickstart, "cluster")
			}
			v, err := ga.Verify(ctx, string(rev), quickstart, "cluster")
			if err != nil {
				t.Fatal(err)
			}
			refusal := fg.statuses[string(rev)+" "+ApprovalContext]
			switch {
			case tc.wantBy == "" && (findErr == nil || !strings.Contains(findErr.Error(), "pushed without a pull request") || v.OK || !strings.HasPrefix(refusal, "failure")):
				t.Errorf("Find = %+v, %v; Verify OK %v; status %q: want no approval, refused, with a failure status", a, findErr, v.OK, refusal)
			case tc.wantBy != "" && (findErr != nil || a.By != tc.wantBy || !v.OK || refusal != ""):
				t.Errorf("Find = %+v, %v; Verify OK %v; status %q: want %s's approval, acted on, no status", a, findErr, v.OK, refusal, tc.wantBy)
			}
		})
	}
}
