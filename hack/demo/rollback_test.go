package main

import (
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/status"
)

// rollbackBefore are world lines as recordWorld reads them before an
// adoption: servers and ports, Secrets, Nodes without a providerID, and
// kube-system's objects.
var rollbackBefore = []string{
	"ConfigMap kube-system/kubeadm-config: {\"dataDigest\":\"sha256:0123456789ab\",\"dataKeys\":[\"ClusterConfiguration\"]}",
	"DaemonSet kube-system/kube-proxy: {\"spec\":{}}",
	"Node cp-0 spec.providerID: <none>",
	"Node cp-0: labels map[], taints [], unschedulable false",
	"Node md-0 spec.providerID: <none>",
	"Node md-0: labels map[], taints [], unschedulable false",
	"Secret default/c-ca: cluster.x-k8s.io/secret, keys [tls.crt tls.key], labels map[], owners [], data sha256:aaaaaaaaaaaa",
	"Secret default/c-kubeconfig: cluster.x-k8s.io/secret, keys [value], labels map[], owners [], data sha256:bbbbbbbbbbbb",
	"port <port server cp-0> on <network> (compute:nova): device <server cp-0>, ips [<ip cp-0>], security groups []",
	"server cp-0: ACTIVE, security groups [default]",
	"server md-0: ACTIVE, security groups [default]",
}

// TestRollbackAllowed: a Node's providerID set where it was empty is the
// one difference allowed, and only as the pair of lines of one Node; a
// changed Secret, a left-over object, a providerID changed or removed, or
// one line of the pair alone are not.
func TestRollbackAllowed(t *testing.T) {
	// After the rollback: each Node has the providerID ferry set.
	var after []string
	for _, l := range rollbackBefore {
		if node, ok := strings.CutSuffix(l, " spec.providerID: <none>"); ok {
			l = node + " spec.providerID: openstack:///<server " + strings.TrimPrefix(node, "Node ") + ">"
		}
		after = append(after, l)
	}
	diffs := judge(diffLines(rollbackBefore, after), rollbackAllowed)
	if len(diffs) != 4 {
		t.Fatalf("diffs %v: want the two nodes' providerID lines, before and after", diffs)
	}
	for _, d := range diffs {
		if d.allowed == "" {
			t.Errorf("%s: not allowed", d)
		}
	}
	summary, ok := diffSummary(rollbackBefore, diffs)
	if want := "compared 11 lines (4 objects, 2 servers, 2 Secrets); 4 differences, all allowed"; summary != want || !ok {
		t.Errorf("summary %q (ok %t), want %q", summary, ok, want)
	}

	for _, c := range []struct {
		name  string
		diffs []string
	}{
		{"a Secret's data changed", []string{
			"- Secret default/c-ca: cluster.x-k8s.io/secret, keys [tls.crt tls.key], labels map[], owners [], data sha256:aaaaaaaaaaaa",
			"+ Secret default/c-ca: cluster.x-k8s.io/secret, keys [tls.crt tls.key], labels map[], owners [], data sha256:cccccccccccc"}},
		{"an object left", []string{"+ DaemonSet kube-system/openstack-cloud-controller-manager: {}"}},
		{"a providerID set without the line before", []string{"+ Node cp-0 spec.providerID: openstack:///<server cp-0>"}},
		{"a providerID removed", []string{"- Node cp-0 spec.providerID: openstack:///<server cp-0>", "+ Node cp-0 spec.providerID: <none>"}},
		{"a providerID changed", []string{"- Node cp-0 spec.providerID: openstack:///<server cp-0>", "+ Node cp-0 spec.providerID: openstack:///<server other>"}},
		{"two nodes' lines paired", []string{"- Node cp-0 spec.providerID: <none>", "+ Node md-0 spec.providerID: openstack:///<server md-0>"}},
	} {
		for _, d := range judge(c.diffs, rollbackAllowed) {
			if d.allowed != "" {
				t.Errorf("%s: %s allowed", c.name, d.line)
			}
		}
	}

	diffs = judge([]string{"+ DaemonSet kube-system/openstack-cloud-controller-manager: {}", "- Node cp-0 spec.providerID: <none>",
		"+ Node cp-0 spec.providerID: openstack:///<server cp-0>"}, rollbackAllowed)
	summary, ok = diffSummary(rollbackBefore, diffs)
	if want := "compared 11 lines (4 objects, 2 servers, 2 Secrets); 3 differences, 1 not allowed"; summary != want || ok {
		t.Errorf("summary %q (ok %t), want %q", summary, ok, want)
	}
	if got := diffs[0].String(); !strings.HasPrefix(got, "✗ + DaemonSet") {
		t.Errorf("a difference not allowed reads %q", got)
	}
	if got := diffs[1].String(); !strings.HasPrefix(got, "✓ - Node cp-0") || !strings.Contains(got, "allowed: ") {
		t.Errorf("an allowed difference reads %q", got)
	}
	if summary, ok := diffSummary(rollbackBefore, nil); !ok || !strings.HasSuffix(summary, "; 0 differences, the world is as it was") {
		t.Errorf("no difference: %q (ok %t)", summary, ok)
	}
}

// TestRollbackProgress: the rollback is done when every phase is
// RolledBack; a Failed phase is an error naming it and its reason (the
// phase's, or its failed step's error); an invalid plan is an error.
func TestRollbackProgress(t *testing.T) {
	phases := []string{"cluster", "control-plane", "workers"}
	st := &status.PlanStatus{Revision: "0123456789abcdef", Phases: []status.PhaseStatus{
		{Name: "cluster", State: status.PhaseSucceeded},
		{Name: "control-plane", State: status.PhaseRollingBack, Steps: []status.StepStatus{{Action: "delete", Target: "Machine/m", State: status.StepRunning}}},
		{Name: "workers", State: status.PhaseRolledBack},
	}}
	done, detail, err := rollbackProgress(st, phases)
	if done || err != nil || !strings.Contains(detail, "control-plane RollingBack, running ") || !strings.Contains(detail, "workers RolledBack") {
		t.Errorf("rolling back: done %t, %q, %v", done, detail, err)
	}
	for i := range st.Phases {
		st.Phases[i].State, st.Phases[i].Steps = status.PhaseRolledBack, nil
	}
	if done, _, err := rollbackProgress(st, phases); !done || err != nil {
		t.Errorf("all rolled back: done %t, %v", done, err)
	}

	st.Phases[1] = status.PhaseStatus{Name: "control-plane", State: status.PhaseFailed, Reason: "Machine m: still has a finalizer"}
	if _, _, err := rollbackProgress(st, phases); err == nil || !strings.Contains(err.Error(), "phase control-plane failed to roll back: Machine m: still has a finalizer") {
		t.Errorf("failed: %v", err)
	}
	st.Phases[1] = status.PhaseStatus{Name: "control-plane", State: status.PhaseFailed,
		Steps: []status.StepStatus{{Action: "delete", Target: "Machine/m", State: status.StepFailed, LastError: "forbidden"}}}
	if _, _, err := rollbackProgress(st, phases); err == nil || !strings.Contains(err.Error(), "phase control-plane failed to roll back: ") || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("failed step: %v", err)
	}
	if done, detail, _ := rollbackProgress(&status.PlanStatus{}, phases); done || !strings.Contains(detail, "cluster not in the status") {
		t.Errorf("empty status: done %t, %q", done, detail)
	}
	st.Invalid = []string{"plans/c.yaml:20: spec.rollback: unknown field"}
	if _, _, err := rollbackProgress(st, phases); err == nil || !strings.Contains(err.Error(), "0123456789ab is invalid: plans/c.yaml:20") {
		t.Errorf("invalid plan: %v", err)
	}
}

// TestDowntime: the longest time the endpoint did not answer runs from
// the first failed check to the last failed one before it answered again.
func TestDowntime(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var d downtime
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	for _, c := range []struct {
		at   float64
		ok   bool
		down time.Duration
	}{
		{0, true, 0}, {1, false, 0}, {2, false, time.Second}, {3, true, 0},
		{4, false, 0}, {5, false, time.Second}, {6, false, 2 * time.Second}, {7.5, false, 3500 * time.Millisecond}, {8, true, 0},
	} {
		if got := d.observe(at(c.at), c.ok, "connection refused"); got != c.down {
			t.Errorf("at %gs: down %s, want %s", c.at, got, c.down)
		}
	}
	if d.checks != 9 || d.failed != 6 || d.longest != 3500*time.Millisecond {
		t.Errorf("checks %d, failed %d, longest %s", d.checks, d.failed, d.longest)
	}
	if s := d.String(); !strings.HasPrefix(s, "✓ the endpoint answered 3 of 9 checks") {
		t.Errorf("%q", s)
	}
	d.observe(at(9), false, "timeout")
	d.observe(at(15), false, "timeout")
	if s := d.String(); !strings.HasPrefix(s, "✗ ") || !strings.Contains(s, "6s") {
		t.Errorf("%q", s)
	}
}

// TestSpecWith: extra spec lines go before spec.approve.
func TestSpecWith(t *testing.T) {
	plan := "spec:\n  cluster: {name: c}\n  approve: \"\"\n"
	if got, want := specWith(plan, toNone(nil).spec()), "spec:\n  cluster: {name: c}\n  rollback: {to: none}\n  approve: \"\"\n"; got != want {
		t.Errorf("specWith:\n%s\nwant\n%s", got, want)
	}
}
