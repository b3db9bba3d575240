package status_test

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/status/statusfile"
	"github.com/ferry-dev/ferry/internal/step"
)

func TestStatusMerge(t *testing.T) {
	keypairCreated := evt(keypair, events.Succeeded, 2, 12, 2*time.Second, "created keypair capi-key", "")
	keypairCreated.Created = []events.Resource{{Kind: "Keypair", ID: "capi-key", Name: "capi-key"}}

	workersRunnable := result("workers", "workers", "",
		phase("cluster", planner.Succeeded, "", 6),
		phase("control-plane", planner.Succeeded, "", 2),
		phase("workers", planner.Approved, "", 0, []step.Step{drain}, []step.Step{probe}))
	workersProbeLeft := result("workers", "workers", "",
		phase("cluster", planner.Succeeded, "", 6),
		phase("control-plane", planner.Succeeded, "", 2),
		phase("workers", planner.Approved, "", 1, []step.Step{probe}))

	cpRunnable := result("control-plane", "control-plane", "",
		phase("cluster", planner.Succeeded, "", 6),
		phase("control-plane", planner.Approved, "", 0, []step.Step{mkKCP}, []step.Step{waitKCP}),
		phase("workers", planner.Pending, "not approved: spec.approve is control-plane", 0, []step.Step{drain}, []step.Step{probe}))
	const movedBack = "spec.approve moved back from control-plane to cluster: ferry stops before its next step and rolls nothing back; approve control-plane again to go on"
	cpStopped := result("cluster", "", movedBack,
		phase("cluster", planner.Succeeded, "", 6),
		phase("control-plane", planner.Pending, "not approved: spec.approve is cluster", 0, []step.Step{mkKCP}, []step.Step{waitKCP}),
		phase("workers", planner.Pending, "not approved: spec.approve is cluster", 0, []step.Step{drain}, []step.Step{probe}))

	for _, tc := range []struct {
		name  string
		ops   []op
		want  string
		check func(t *testing.T, st *status.PlanStatus)
	}{{
		name: "fresh plan: phases from the planner, steps pending",
		ops:  []op{plan(freshResult(), rev1, 0)},
		want: `approved=
cluster Approved 2/4: copy-secret/capi-quickstart-cloud-config=Pending ensure-keypair/capi-key=Pending create/capi-quickstart=Pending wait/capi-quickstart=Pending
control-plane Pending 0/2: create/capi-quickstart-control-plane=Pending wait/capi-quickstart-control-plane=Pending
workers Pending 0/2: drain/capi-quickstart-md-0-wq8fz=Pending probe/capi-quickstart-md-0-wq8fz=Pending
`,
	}, {
		name: "results in order",
		ops: []op{
			plan(freshResult(), rev1, 0),
			publish(1, copySecret, keypair),
			apply(ok(copySecret, 1, 5)),
			apply(evt(keypair, events.Retrying, 1, 6, time.Second, "", "409 Conflict: keypair is being created")),
			apply(keypairCreated),
			plan(clusterLeft(4, []step.Step{mkCluster}, []step.Step{waitOSC}), rev1, 13),
			publish(14, mkCluster),
			apply(ok(mkCluster, 1, 16)),
			plan(clusterLeft(5, []step.Step{waitOSC}), rev1, 17),
			publish(18, waitOSC),
			apply(ok(waitOSC, 1, 30)),
			plan(result("cluster", "", "",
				phase("cluster", planner.Succeeded, "", 6),
				freshResult().Phases[1], freshResult().Phases[2]), rev1, 40),
		},
		want: `approved=cluster created=Keypair/capi-key
cluster Succeeded 6/0: copy-secret/capi-quickstart-cloud-config=Succeeded#1 ensure-keypair/capi-key=Succeeded#2 create/capi-quickstart=Succeeded#1 wait/capi-quickstart=Succeeded#1
control-plane Pending 0/2: create/capi-quickstart-control-plane=Pending wait/capi-quickstart-control-plane=Pending
workers Pending 0/2: drain/capi-quickstart-md-0-wq8fz=Pending probe/capi-quickstart-md-0-wq8fz=Pending
`,
		check: func(t *testing.T, st *status.PlanStatus) {
			cl := st.Phase("cluster")
			if !cl.Started.Equal(at(1)) || !cl.Finished.Equal(at(30)) {
				t.Errorf("cluster started %v finished %v; want %v and %v (when the last step succeeded)", cl.Started, cl.Finished, at(1), at(30))
			}
			kp := cl.Step(keypair.Key)
			if kp.LastError != "409 Conflict: keypair is being created" || kp.Message != "created keypair capi-key" ||
				kp.Duration != status.Duration(2*time.Second) || !kp.Finished.Equal(at(12)) {
				t.Errorf("keypair step = %+v; want the retry's error kept, the success's message, duration and time", kp)
			}
			if !st.UpdatedAt.Equal(at(30)) {
				t.Errorf("UpdatedAt = %v; want %v: the last planning changed nothing", st.UpdatedAt, at(30))
			}
		},
	}, {
		name: "mid-phase between groups the phase stays Running",
		ops: []op{
			plan(freshResult(), rev1, 0),
			publish(1, copySecret, keypair),
			apply(ok(copySecret, 1, 5)),
			apply(ok(keypair, 1, 6)),
			plan(clusterLeft(4, []step.Step{mkCluster}, []step.Step{waitOSC}), rev1, 7),
		},
		want: `approved=cluster
cluster Running 4/2: copy-secret/capi-quickstart-cloud-config=Succeeded#1 ensure-keypair/capi-key=Succeeded#1 create/capi-quickstart=Pending wait/capi-quickstart=Pending
control-plane Pending 0/2: create/capi-quickstart-control-plane=Pending wait/capi-quickstart-control-plane=Pending
workers Pending 0/2: drain/capi-quickstart-md-0-wq8fz=Pending probe/capi-quickstart-md-0-wq8fz=Pending
`,
	}, {
		name: "redelivered attempts change nothing",
		ops: []op{
			plan(freshResult(), rev1, 0),
			publish(1, copySecret),
			apply(evt(copySecret, events.Retrying, 1, 5, time.Second, "", "connection refused")),
			apply(ok(copySecret, 2, 10)),
			apply(ok(copySecret, 2, 10)),
			apply(evt(copySecret, events.Retrying, 1, 5, time.Second, "", "connection refused")),
		},
		want: `approved=cluster
cluster Running 3/3: copy-secret/capi-quickstart-cloud-config=Succeeded#2 ensure-keypair/capi-key=Pending create/capi-quickstart=Pending wait/capi-quickstart=Pending
control-plane Pending 0/2: create/capi-quickstart-control-plane=Pending wait/capi-quickstart-control-plane=Pending
workers Pending 0/2: drain/capi-quickstart-md-0-wq8fz=Pending probe/capi-quickstart-md-0-wq8fz=Pending
`,
		check: func(t *testing.T, st *status.PlanStatus) {
			if !st.UpdatedAt.Equal(at(10)) {
				t.Errorf("UpdatedAt = %v; want %v", st.UpdatedAt, at(10))
			}
		},
	}, {
		name: "terminal failure fails the phase until the step is published again",
		ops: []op{
			plan(freshResult(), rev1, 0),
			publish(1, copySecret, keypair),
			apply(ok(copySecret, 1, 5)),
			apply(evt(keypair, events.Failed, 3, 20, time.Second, "", "authenticate to cloud openstack: 401 Unauthorized")),
			plan(clusterLeft(3, []step.Step{keypair}, []step.Step{mkCluster}, []step.Step{waitOSC}), rev1, 25),
		},
		want: `approved=cluster
cluster Failed 3/3 (step cluster/ensure-keypair/keypair/capi-key failed: authenticate to cloud openstack: 401 Unauthorized): copy-secret/capi-quickstart-cloud-config=Succeeded#1 ensure-keypair/capi-key=Failed#3 create/capi-quickstart=Pending wait/capi-quickstart=Pending
control-plane Pending 0/2: create/capi-quickstart-control-plane=Pending wait/capi-quickstart-control-plane=Pending
workers Pending 0/2: drain/capi-quickstart-md-0-wq8fz=Pending probe/capi-quickstart-md-0-wq8fz=Pending
`,
		check: func(t *testing.T, st *status.PlanStatus) {
			if f := st.Phase("cluster").Finished; !f.Equal(at(20)) {
				t.Errorf("cluster finished %v; want %v, when the step failed", f, at(20))
			}
			status.Published(st, []step.Step{keypair}, at(30))
			if ph := st.Phase("cluster"); ph.State != status.PhaseRunning || ph.Reason != "" || !ph.Finished.IsZero() || ph.Step(keypair.Key).State != status.StepRunning {
				t.Errorf("published again: cluster %s %q finished %v, step %s; want Running, no reason, not finished, step Running",
					ph.State, ph.Reason, ph.Finished, ph.Step(keypair.Key).State)
			}
		},
	}, {
		name: "probe check recorded",
		ops: []op{
			plan(workersRunnable, rev1, 0),
			publish(1, drain),
			apply(ok(drain, 1, 60)),
			plan(workersProbeLeft, rev1, 61),
			publish(62, probe),
			apply(evt(probe, events.Retrying, 1, 65, time.Second, "", "GET https://shop.example.com/healthz: 503")),
			apply(ok(probe, 2, 70)),
			apply(evt(probe, events.Retrying, 1, 65, time.Second, "", "GET https://shop.example.com/healthz: 503")),
		},
		want: `approved=workers checks=workers/probe/node/capi-quickstart-md-0-wq8fz
cluster Succeeded 6/0:
control-plane Succeeded 2/0:
workers Succeeded 2/0: drain/capi-quickstart-md-0-wq8fz=Succeeded#1 probe/capi-quickstart-md-0-wq8fz=Succeeded#2
`,
		check: func(t *testing.T, st *status.PlanStatus) {
			want := observed.Record{Approved: "workers", Checks: []string{probe.Key}}
			if got := status.Record(st); got.Approved != want.Approved || !slices.Equal(got.Checks, want.Checks) {
				t.Errorf("Record = %+v; want %+v", got, want)
			}
		},
	}, {
		name: "approve moved back: stopped, approved kept, in-flight step finishes",
		ops: []op{
			plan(cpRunnable, rev1, 0),
			publish(1, mkKCP),
			plan(cpStopped, rev2, 5),
		},
		want: `approved=control-plane stopped
cluster Succeeded 6/0:
control-plane Running 0/2: create/capi-quickstart-control-plane=Running wait/capi-quickstart-control-plane=Pending
workers Pending 0/2: drain/capi-quickstart-md-0-wq8fz=Pending probe/capi-quickstart-md-0-wq8fz=Pending
`,
		check: func(t *testing.T, st *status.PlanStatus) {
			if st.Stopped != movedBack {
				t.Errorf("Stopped = %q; want the planner's reason", st.Stopped)
			}
			if r := status.Record(st); r.Approved != "control-plane" {
				t.Errorf("Record().Approved = %q; want control-plane: it never moves back", r.Approved)
			}
			status.ApplyResult(st, ok(mkKCP, 1, 8))
			if ph := st.Phase("control-plane"); ph.State != status.PhasePending || ph.Reason != "stopped: approval moved backwards" || ph.Done != 1 {
				t.Errorf("after the in-flight step: control-plane %s %q done %d; want Pending, stopped, 1 done", ph.State, ph.Reason, ph.Done)
			}
			st = status.FromResult(st, cpStopped, rev2, at(9))
			if ph := st.Phase("control-plane"); ph.State != status.PhasePending || ph.Reason != "not approved: spec.approve is cluster" {
				t.Errorf("planned again: control-plane %s %q; want the planner's Pending", ph.State, ph.Reason)
			}
		},
	}, {
		name: "blocked phase says why",
		ops: []op{plan(result("control-plane", "", "",
			phase("cluster", planner.Succeeded, "", 6),
			phase("control-plane", planner.Blocked, "KubeadmControlPlane capi-quickstart-control-plane: 3 replicas, but the workload cluster has 2 control-plane nodes", 0, []step.Step{mkKCP}, []step.Step{waitKCP}),
			phase("workers", planner.Pending, "not approved: spec.approve is control-plane", 0, []step.Step{drain}, []step.Step{probe})), rev1, 0)},
		want: `approved=
cluster Succeeded 6/0:
control-plane Blocked 0/2 (KubeadmControlPlane capi-quickstart-control-plane: 3 replicas, but the workload cluster has 2 control-plane nodes): create/capi-quickstart-control-plane=Pending wait/capi-quickstart-control-plane=Pending
workers Pending 0/2: drain/capi-quickstart-md-0-wq8fz=Pending probe/capi-quickstart-md-0-wq8fz=Pending
`,
	}, {
		name: "a step the planner no longer lists is done, even without its result",
		ops: []op{
			plan(freshResult(), rev1, 0),
			publish(1, copySecret),
			plan(clusterLeft(3, []step.Step{keypair}, []step.Step{mkCluster}, []step.Step{waitOSC}), rev1, 30),
		},
		want: `approved=cluster
cluster Running 3/3: copy-secret/capi-quickstart-cloud-config=Succeeded ensure-keypair/capi-key=Pending create/capi-quickstart=Pending wait/capi-quickstart=Pending
control-plane Pending 0/2: create/capi-quickstart-control-plane=Pending wait/capi-quickstart-control-plane=Pending
workers Pending 0/2: drain/capi-quickstart-md-0-wq8fz=Pending probe/capi-quickstart-md-0-wq8fz=Pending
`,
		check: func(t *testing.T, st *status.PlanStatus) {
			if s := st.Phase("cluster").Step(copySecret.Key); s.Message != "effect observed" || !s.Finished.Equal(at(30)) {
				t.Errorf("copy-secret = %+v; want Succeeded by observation at %v", s, at(30))
			}
		},
	}, {
		// make chaos LAYOUT=cluster run 18 (seed 1795714997845634026): the
		// workload API server restarted, the planner listed no node steps,
		// and the failed drain read Succeeded, "effect observed".
		name: "a phase the planner could not see whole keeps its steps, a failure too",
		ops: []op{
			plan(workersRunnable, rev1, 0),
			publish(1, drain),
			apply(evt(drain, events.Failed, 1, 5, time.Second, "", "drain refused: a pod without a controller")),
			plan(result("workers", "", "",
				phase("cluster", planner.Succeeded, "", 6),
				phase("control-plane", planner.Succeeded, "", 2),
				incomplete(phase("workers", planner.Blocked, "workload cluster unreachable", 0))), rev1, 10),
		},
		want: `approved=workers
cluster Succeeded 6/0:
control-plane Succeeded 2/0:
workers Failed 0/0 (step workers/drain/node/capi-quickstart-md-0-wq8fz failed: drain refused: a pod without a controller): drain/capi-quickstart-md-0-wq8fz=Failed#1 probe/capi-quickstart-md-0-wq8fz=Pending
`,
	}, {
		name: "a late result of an older revision does not undo a newer one",
		ops: []op{
			plan(freshResult(), rev1, 0),
			publish(1, copySecret),
			apply(evt(copySecret, events.Retrying, 2, 10, time.Second, "", "timeout")),
			plan(freshResult(), rev2, 11),
			publish(12, copySecret),
			apply(func() *events.ResultEvent { e := ok(copySecret, 1, 15); e.Revision = rev2; return e }()),
			apply(evt(copySecret, events.Failed, 3, 14, time.Second, "", "timeout")),
		},
		want: `approved=cluster
cluster Running 3/3: copy-secret/capi-quickstart-cloud-config=Succeeded#1 ensure-keypair/capi-key=Pending create/capi-quickstart=Pending wait/capi-quickstart=Pending
control-plane Pending 0/2: create/capi-quickstart-control-plane=Pending wait/capi-quickstart-control-plane=Pending
workers Pending 0/2: drain/capi-quickstart-md-0-wq8fz=Pending probe/capi-quickstart-md-0-wq8fz=Pending
`,
		check: func(t *testing.T, st *status.PlanStatus) {
			if s := st.Phase("cluster").Step(copySecret.Key); s.Revision != rev2 {
				t.Errorf("copy-secret revision %s; want %s", s.Revision, rev2)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			st := run(tc.ops...)
			if got := summary(st); got != tc.want {
				t.Errorf("status:\n%s\nwant:\n%s", got, tc.want)
			}
			if tc.check != nil {
				tc.check(t, st)
			}
		})
	}
}

// TestStatusMergeDeterministic: the same input gives the same status, byte for
// byte, and planning again with nothing new changes nothing, not even
// UpdatedAt, so the writer makes no commit.
func TestStatusMergeDeterministic(t *testing.T) {
	build := func() *status.PlanStatus {
		return run(
			plan(freshResult(), rev1, 0),
			publish(1, copySecret, keypair),
			apply(ok(copySecret, 1, 5)),
			apply(evt(keypair, events.Failed, 1, 6, time.Second, "", "quota exceeded")),
		)
	}
	a, b := build(), build()
	ya, err := statusfile.Encode(a)
	if err != nil {
		t.Fatal(err)
	}
	yb, _ := statusfile.Encode(b)
	if !bytes.Equal(ya, yb) {
		t.Fatalf("two runs differ:\n%s\n---\n%s", ya, yb)
	}
	again := status.FromResult(a, clusterLeft(3, []step.Step{keypair}, []step.Step{mkCluster}, []step.Step{waitOSC}), rev1, at(100))
	again = status.FromResult(again, clusterLeft(3, []step.Step{keypair}, []step.Step{mkCluster}, []step.Step{waitOSC}), rev1, at(200))
	third := status.FromResult(again, clusterLeft(3, []step.Step{keypair}, []step.Step{mkCluster}, []step.Step{waitOSC}), rev1, at(300))
	y2, _ := statusfile.Encode(again)
	y3, _ := statusfile.Encode(third)
	if !bytes.Equal(y2, y3) || !third.UpdatedAt.Equal(again.UpdatedAt) {
		t.Errorf("planning again with nothing new changed the status:\n%s\n---\n%s", y2, y3)
	}
	// FromResult does not change prev.
	if !bytes.Equal(mustEncode(t, a), ya) {
		t.Errorf("FromResult changed its prev argument")
	}
}

func mustEncode(t *testing.T, st *status.PlanStatus) []byte {
	t.Helper()
	b, err := statusfile.Encode(st)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestStatusSetApproval(t *testing.T) {
	st := status.FromResult(nil, freshResult(), rev1, t0)
	status.SetApproval(st, status.Approval{Phase: "control-plane", By: "bob", PR: 15})
	status.SetApproval(st, status.Approval{Phase: "cluster", By: "alice", Commit: rev1})
	status.SetApproval(st, status.Approval{Phase: "cluster", By: "alice", PR: 12})
	var got []string
	for _, a := range st.ApprovedBy {
		got = append(got, a.Phase+"="+a.String())
	}
	if want := []string{"cluster=alice (#12)", "control-plane=bob (#15)"}; !slices.Equal(got, want) {
		t.Errorf("ApprovedBy = %q; want %q", got, want)
	}
	if r := status.Record(nil); r.Approved != "" || r.Checks != nil {
		t.Errorf("Record(nil) = %+v; want empty", r)
	}
}
