package reconciler

import (
	"reflect"
	"testing"

	"github.com/ferry-dev/ferry/internal/status"
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
