package main

import (
	"fmt"
	"testing"
)

// TestChaosPlan: runs 3, 6, 9, … are replace runs with the drain faults
// in turn; runs 5, 11, 17, … rollback runs with the undo faults in turn,
// one of them among CI's six runs; the others adopt runs with the adopt
// faults in turn.
func TestChaosPlan(t *testing.T) {
	scs, fs := chaosPlan(20)
	var got []string
	for i := range scs {
		got = append(got, fmt.Sprintf("%d %s %s", i+1, scs[i].name, fs[i].name))
	}
	want := map[int]string{
		1:  "adopt " + faults[0].name,
		2:  "adopt " + faults[1].name,
		3:  "replace " + drainFaults[0].name,
		4:  "adopt " + faults[2].name,
		5:  "rollback " + undoFaults[0].name,
		6:  "replace " + drainFaults[1].name,
		7:  "adopt " + faults[3].name,
		11: "rollback " + undoFaults[1].name,
		17: "rollback " + undoFaults[0].name,
		18: "replace " + drainFaults[1].name,
	}
	for n, w := range want {
		if g := got[n-1]; g != fmt.Sprintf("%d %s", n, w) {
			t.Errorf("run %d: %s, want %s", n, g, w)
		}
	}
	for i, f := range fs {
		if scs[i].rollback != f.undo || (scs[i].name == "replace") != f.drain {
			t.Errorf("run %d: scenario %s with fault %q", i+1, scs[i].name, f.name)
		}
	}
	ci, _ := chaosPlan(6)
	rollbacks := 0
	for _, sc := range ci {
		if sc.rollback {
			rollbacks++
		}
	}
	if rollbacks != 1 {
		t.Errorf("CI's 6 runs hold %d rollback runs, want 1", rollbacks)
	}
}

// TestLogField: a plain value, a quoted one (a target with a space) and
// a missing key.
func TestLogField(t *testing.T) {
	line := `time=2026-11-25T13:04:05.123Z level=INFO msg="running step" phase=workers step=workers/remove/OpenStackServer/a action=remove target="OpenStackServer a"`
	for key, want := range map[string]string{"phase": "workers", "step": "workers/remove/OpenStackServer/a", "target": "OpenStackServer a", "msg": "running step", "attempt": ""} {
		if got := logField(line, key); got != want {
			t.Errorf("logField(%s) = %q, want %q", key, got, want)
		}
	}
}
