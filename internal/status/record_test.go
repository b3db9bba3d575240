package status_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/planfile"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/step"
)

// TestStatusRecordFeedsPlanner runs the real planner on the example plan: its
// phases come through as they are, and the status of a plan that acted on
// control-plane, fed back through Record after spec.approve moved back to
// cluster, stops the plan.
func TestStatusRecordFeedsPlanner(t *testing.T) {
	path := filepath.Join("..", "..", "plans", "capi-quickstart.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := planfile.Decode(path, data)
	if err != nil {
		t.Fatal(err)
	}
	p := f.Plan
	p.Spec.Approve = "control-plane"
	// Nothing exists: the Secrets the cluster phase copies are missing.
	res, err := planner.Plan(p, &observed.Snapshot{})
	if err != nil {
		t.Fatal(err)
	}
	st := status.FromResult(nil, res, rev1, t0)
	cl := st.Phase("cluster")
	if cl == nil || cl.State != status.PhaseBlocked || cl.Reason != res.Phase("cluster").Reason || cl.Left == 0 {
		t.Fatalf("cluster = %+v; want Blocked with the planner's reason and its steps left", cl)
	}
	// Acting on control-plane (publishing a step of it) moves Approved.
	status.Published(st, []step.Step{mkKCP}, at(1))

	p.Spec.Approve = "cluster"
	res, err = planner.Plan(p, &observed.Snapshot{Record: status.Record(st)})
	if err != nil {
		t.Fatal(err)
	}
	st = status.FromResult(st, res, rev2, at(2))
	if !strings.Contains(st.Stopped, "moved back from control-plane to cluster") || res.Next() != nil {
		t.Errorf("Stopped = %q, next %v; want the plan stopped", st.Stopped, res.Next())
	}
}

// TestResultOfUnplannedStep: a reconciler that restarted while a step ran
// gets its result before it plans the step again (the planner already sees
// it done); the status shows the step as its event named it.
func TestResultOfUnplannedStep(t *testing.T) {
	st := &status.PlanStatus{Plan: "capi-quickstart"}
	status.ApplyResult(st, &events.ResultEvent{
		StepKey: "cluster/ensure-keypair/keypair/capi-key", Phase: "cluster", Executor: step.OpenStack,
		Action: step.EnsureKeypair, Target: "Keypair capi-key", Outcome: events.Succeeded, Attempt: 1, At: at(1),
	})
	ss := st.Phase("cluster").Step("cluster/ensure-keypair/keypair/capi-key")
	if ss == nil || ss.Action != step.EnsureKeypair || ss.Target != "Keypair capi-key" || ss.State != status.StepSucceeded {
		t.Fatalf("step %+v; want ensure-keypair of Keypair capi-key, succeeded", ss)
	}
	// An event from before the fields existed: the key is all there is.
	status.ApplyResult(st, &events.ResultEvent{StepKey: "cluster/create/cluster/c", Phase: "cluster", Executor: step.Kube, Outcome: events.Succeeded, Attempt: 1, At: at(2)})
	if ss := st.Phase("cluster").Step("cluster/create/cluster/c"); ss == nil || ss.Action != step.Create || ss.Target != "Cluster c" {
		t.Fatalf("step %+v from a key alone", ss)
	}
}
