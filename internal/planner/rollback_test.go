package planner

import (
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
)

// TestRollbackPointOfNoReturn: once rollout has begun, no phase of an
// adopt plan is rolled back, and the plan says why.
func TestRollbackPointOfNoReturn(t *testing.T) {
	p := loadExample(t, "capi-quickstart")
	p.Spec.Adopt.Rollout = true
	p.Spec.Approve = ""
	p.Spec.Rollback = &v1alpha1.Rollback{To: v1alpha1.RollbackNone}
	snap := &observed.Snapshot{
		Record:  observed.Record{Approved: v1alpha1.PhaseRollout},
		Created: []observed.Created{{Kind: step.MachineDeployment, Name: "capi-quickstart-md-0", Phase: v1alpha1.PhaseWorkers}},
	}
	res, err := Plan(p, snap)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Stopped, "rollout has begun, and it is the point of no return") || res.Next() != nil || res.RolledBack {
		t.Fatalf("rollback after rollout began: stopped %q, next %v, rolled back %t; want it refused", res.Stopped, res.Next(), res.RolledBack)
	}
	// Before rollout began, the same rollback runs.
	snap.Record.Approved = v1alpha1.PhaseWorkers
	if res, err = Plan(p, snap); err != nil {
		t.Fatal(err)
	}
	if res.Stopped != "" || res.Runnable != v1alpha1.PhaseWorkers {
		t.Fatalf("rollback before rollout: stopped %q, runnable %q; want workers runnable", res.Stopped, res.Runnable)
	}
}

// TestRollbackDone: with nothing of the undone phases left, the rollback
// is done and nothing runs; the phases it keeps stay as they are.
func TestRollbackDone(t *testing.T) {
	p := loadExample(t, "capi-quickstart")
	p.Spec.Approve = v1alpha1.PhaseCluster
	p.Spec.Rollback = &v1alpha1.Rollback{To: v1alpha1.PhaseCluster}
	snap := &observed.Snapshot{
		Record:  observed.Record{Approved: v1alpha1.PhaseWorkers},
		Created: []observed.Created{{Kind: step.Cluster, Name: "capi-quickstart", Phase: v1alpha1.PhaseCluster}},
		Cluster: &observed.Cluster{InfrastructureRef: observed.Ref{Kind: step.OpenStackCluster, Name: "capi-quickstart"}},
	}
	res, err := Plan(p, snap)
	if err != nil {
		t.Fatal(err)
	}
	if !res.RolledBack || res.Next() != nil {
		t.Fatalf("rolled back %t, next %v; want the rollback done", res.RolledBack, res.Next())
	}
	for _, ph := range res.Phases {
		undone := ph.Name != v1alpha1.PhaseCluster
		if ph.Undo != undone || (undone && ph.State != RolledBack) {
			t.Errorf("phase %s: undo %t, state %s", ph.Name, ph.Undo, ph.State)
		}
	}
}
