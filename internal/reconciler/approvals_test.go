package reconciler

import (
	"errors"
	"testing"
	"time"
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
