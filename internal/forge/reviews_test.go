package forge

import (
	"slices"
	"testing"
	"time"
)

// TestApprovers: a reviewer counts when their last word approves the head
// commit; an approval of an earlier commit, a stale or dismissed one, the
// author's own, or one taken back by a later request for changes does
// not; a comment after an approval leaves it standing.
func TestApprovers(t *testing.T) {
	at := func(m int) time.Time { return time.Date(2026, 11, 28, 6, m, 0, 0, time.UTC) }
	reviews := []Review{
		{Author: "bob", State: ReviewApproved, Commit: "head", Submitted: at(1)},
		{Author: "bob", State: "COMMENTED", Commit: "head", Submitted: at(2)},
		{Author: "carol", State: ReviewApproved, Commit: "old", Submitted: at(1)},
		{Author: "dave", State: ReviewApproved, Commit: "head", Submitted: at(1)},
		{Author: "dave", State: ReviewChangesRequested, Commit: "head", Submitted: at(3)},
		{Author: "erin", State: ReviewApproved, Commit: "head", Submitted: at(1), Stale: true},
		{Author: "Alice", State: ReviewApproved, Commit: "head", Submitted: at(1)},
		{Author: "frank", State: ReviewChangesRequested, Commit: "head", Submitted: at(1)},
		{Author: "frank", State: ReviewApproved, Commit: "head", Submitted: at(4)},
	}
	if got, want := Approvers(reviews, "alice", "head"), []string{"bob", "frank"}; !slices.Equal(got, want) {
		t.Errorf("approvers = %v; want %v", got, want)
	}
	if got := Approvers(nil, "alice", "head"); len(got) != 0 {
		t.Errorf("approvers of no reviews = %v", got)
	}
}
