package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestChaosPlan: runs 3, 6, 9, … are replace runs with the drain faults
// in turn; runs 5, 11, 17, … rollback runs with the undo faults in turn,
// one of them among six runs; the others adopt runs with the adopt
// faults in turn (Gitea's, which kill Gitea where the GitHub stand-in's
// answer 502 and 403).
func TestChaosPlan(t *testing.T) {
	faults := adoptFaults(forgeGitea, external)
	if got, stand := faults[4].name, adoptFaults(forgeGitHub, external)[4].name; got != "kill -9 Gitea, start it again after 30s" || !strings.Contains(stand, "stand-in answers 502") {
		t.Errorf("the forge's outage: %q on Gitea, %q on the GitHub stand-in", got, stand)
	}
	all := chaosFaults{adopt: faults, drain: drainFaults, undo: undoFaults}
	scs, fs := chaosPlan(20, all)
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
		9:  "replace " + drainFaults[2].name,
		12: "replace " + drainFaults[0].name,
		18: "replace " + drainFaults[2].name,
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
	six, _ := chaosPlan(6, all)
	rollbacks := 0
	for _, sc := range six {
		if sc.rollback {
			rollbacks++
		}
	}
	if rollbacks != 1 {
		t.Errorf("6 runs hold %d rollback runs, want 1", rollbacks)
	}
}

// TestClusterFaults: on the cluster layout the adopt runs take the
// layout's own faults first, so that a short batch meets them, and none
// that needs the external layout's single NATS server.
func TestClusterFaults(t *testing.T) {
	faults := adoptFaults(forgeGitea, cluster)
	for i, f := range clusterFaults {
		if faults[i].name != f.name {
			t.Errorf("cluster fault %d: %q, want %q", i, faults[i].name, f.name)
		}
	}
	for _, f := range faults {
		if strings.Contains(f.name, "the NATS server") || f.name == "kill -9 the reconciler" {
			t.Errorf("the cluster layout's runs take %q", f.name)
		}
	}
	if len(faults) != len(clusterFaults)+4 {
		t.Errorf("%d faults on the cluster layout, want the %d of the layout and 4 others", len(faults), len(clusterFaults))
	}
}

// TestFaultFilter: --fault keeps the faults holding its text in each
// kind of run that has one, every fault in the others, and reports a
// text no fault holds.
func TestFaultFilter(t *testing.T) {
	all := chaosFaults{adopt: adoptFaults(forgeGitea, external), drain: drainFaults, undo: undoFaults}
	got, ok := all.only("workload cluster's API server")
	if !ok || len(got.drain) != 1 || !strings.Contains(got.drain[0].name, "workload cluster's API server") {
		t.Errorf("the drain faults kept: %v (matched %v)", got.drain, ok)
	}
	if len(got.adopt) != len(all.adopt) || len(got.undo) != len(all.undo) {
		t.Errorf("kinds without the text kept %d adopt and %d undo faults, want all %d and %d", len(got.adopt), len(got.undo), len(all.adopt), len(all.undo))
	}
	scs, fs := chaosPlan(3, got)
	if scs[2].name != "replace" || fs[2].name != got.drain[0].name {
		t.Errorf("run 3: %s with %q", scs[2].name, fs[2].name)
	}
	if got, ok := all.only("kill -9"); !ok || len(got.adopt) == len(all.adopt) || len(got.undo) != len(all.undo) {
		t.Errorf("kill -9: %d of %d adopt faults, %d of %d undo faults (matched %v)", len(got.adopt), len(all.adopt), len(got.undo), len(all.undo), ok)
	}
	if _, ok := all.only("no such fault"); ok {
		t.Error("a text no fault holds matched")
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
