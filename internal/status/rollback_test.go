package status_test

import (
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/status/render"
	"github.com/ferry-dev/ferry/internal/step"
)

// TestStatusRollback follows a rollback of workers to control-plane and
// the migration forward again: the undone phase reads RollingBack while
// its undo runs and RolledBack after, with a history of its own; the
// furthest phase acted on does not move while it rolls back and comes
// back to control-plane when it is done; going forward again starts
// workers' history afresh.
func TestStatusRollback(t *testing.T) {
	removeMD := mkStep("workers", step.Kube, step.Remove, step.MachineDeployment, "default", "capi-quickstart-md-0")
	undo := func(state planner.PhaseState, gs ...[]step.Step) *planner.Result {
		ph := phase("workers", state, "", 1, gs...)
		ph.Undo = true
		runnable := "workers"
		if state == planner.RolledBack {
			runnable = ""
		}
		r := result("control-plane", runnable, "", phase("cluster", planner.Succeeded, "", 6), phase("control-plane", planner.Succeeded, "", 2), ph)
		r.Rollback, r.RolledBack = "control-plane", state == planner.RolledBack
		return r
	}
	forward := result("workers", "workers", "", phase("cluster", planner.Succeeded, "", 6), phase("control-plane", planner.Succeeded, "", 2),
		phase("workers", planner.Approved, "", 0, []step.Step{drain}))

	st := run(
		plan(forward, rev1, 1), publish(2, drain), apply(ok(drain, 1, 3)),
		plan(result("workers", "", "", phase("cluster", planner.Succeeded, "", 6), phase("control-plane", planner.Succeeded, "", 2),
			phase("workers", planner.Succeeded, "", 1)), rev1, 4),
	)
	if st.Approved != "workers" || st.Phase("workers").State != status.PhaseSucceeded {
		t.Fatalf("before the rollback:\n%s", summary(st))
	}

	st = run(func(*status.PlanStatus) *status.PlanStatus { return st }, plan(undo(planner.Approved, []step.Step{removeMD}), rev2, 5), publish(6, removeMD))
	ws := st.Phase("workers")
	if ws.State != status.PhaseRollingBack || !ws.Undo || len(ws.Steps) != 1 || ws.Steps[0].Key != removeMD.Key || st.Approved != "workers" || st.Rollback != "control-plane" {
		t.Fatalf("while rolling back (want workers RollingBack with only its undo step, approved still workers):\n%s", summary(st))
	}
	// A reconciler that takes over replays the results of the last minutes,
	// the forward drain's among them (make chaos LAYOUT=cluster run 11,
	// seed 1795714997845634026): that history is Git's, not the undo's.
	status.ApplyResult(st, ok(drain, 1, 3))
	if ws := st.Phase("workers"); len(ws.Steps) != 1 || !ws.Since.Equal(at(5)) {
		t.Fatalf("a forward result replayed into the undo (want only the undo step, since %v):\n%s", at(5), summary(st))
	}
	if got := ws.State.Text(); got != "Rolling back" {
		t.Errorf("RollingBack reads %q", got)
	}

	status.ApplyResult(st, ok(removeMD, 1, 7))
	if st.Phase("workers").State != status.PhaseRolledBack {
		t.Fatalf("after the undo's last step:\n%s", summary(st))
	}
	status.SetApproval(st, status.Approval{Phase: "workers", By: "bob", PR: 3})
	status.SetApproval(st, status.Approval{Phase: status.RollbackApproval("control-plane"), By: "carol", PR: 4})
	// The header is the first line of the table (render.Table).
	var table strings.Builder
	if err := render.Table(&table, st); err != nil {
		t.Fatal(err)
	}
	header, _, _ := strings.Cut(table.String(), "\n")
	if st.Approving() != "rollback to control-plane" || !strings.Contains(header, "rolling back to control-plane (approved by carol (#4))") {
		t.Errorf("approving %q, header %q", st.Approving(), header)
	}
	st = status.FromResult(st, undo(planner.RolledBack), rev2, at(8))
	if len(st.ApprovedBy) != 1 || st.ApprovedBy[0].By != "carol" {
		t.Errorf("approvals after the rollback: %v; want only the rollback's (approving workers again is a new approval)", st.ApprovedBy)
	}
	if st.Phase("workers").State != status.PhaseRolledBack || st.Approved != "control-plane" {
		t.Fatalf("rolled back (want approved control-plane again):\n%s", summary(st))
	}

	st = status.FromResult(st, forward, rev2, at(9))
	if len(st.ApprovedBy) != 0 {
		t.Errorf("approvals going forward again: %v; want the rollback's gone (the next rollback is approved anew)", st.ApprovedBy)
	}
	ws = st.Phase("workers")
	if ws.Undo || ws.State != status.PhaseApproved || len(ws.Steps) != 1 || ws.Steps[0].Key != drain.Key || ws.Steps[0].State != status.StepPending {
		t.Fatalf("forward again (want workers Approved with a fresh history):\n%s", summary(st))
	}
}
