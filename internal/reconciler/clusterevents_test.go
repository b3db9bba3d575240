package reconciler

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"

	"github.com/ferry-dev/ferry/internal/clusterevents"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// memStore is a status branch in memory.
type memStore struct {
	mu       sync.Mutex
	statuses map[string]*status.PlanStatus
}

func (m *memStore) Write(_ context.Context, statuses []*status.PlanStatus) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.statuses == nil {
		m.statuses = map[string]*status.PlanStatus{}
	}
	for _, st := range statuses {
		m.statuses[st.Plan] = st.Clone()
	}
	return "", nil
}

func (m *memStore) ReadAll(context.Context) ([]*status.PlanStatus, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*status.PlanStatus
	for _, st := range m.statuses {
		out = append(out, st.Clone())
	}
	return out, nil
}

type bobApproved struct{}

func (bobApproved) Find(_ context.Context, revision, _, phase string) (status.Approval, error) {
	return status.Approval{Phase: phase, By: "bob", PR: 1, Commit: revision}, nil
}

// TestStatusRecorderClusterEvents: the status recorder writes Events on
// the plan's Cluster, on a real API server, for transitions only. A
// phase that starts names its approver; a step that fails for good is a
// StepFailed and a PhaseFailed; a cycle that changes nothing writes
// nothing; a retried phase running again is counted on its first Event;
// a restart that restores the recorded status reports nothing again; one
// that could not read it reports the current states once more, counted
// on the Events already there.
func TestStatusRecorderClusterEvents(t *testing.T) {
	kube := testenv.StartKube(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := kube.Client.Create(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "capi-quickstart"}}); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	copySecret := step.Step{Key: "cluster/copy-secret/secret/capi-quickstart-cloud-config", Phase: "cluster", Executor: step.Kube,
		Action: step.CopySecret, Target: step.Target{Kind: "Secret", Namespace: "default", Name: "capi-quickstart-cloud-config"}}
	res := func(cluster planner.PhaseState, groups ...step.Group) *planner.Result {
		return &planner.Result{Plan: "capi-quickstart", Cluster: "default/capi-quickstart", Approve: "cluster", Runnable: "cluster",
			Phases: []planner.Phase{{Name: "cluster", State: cluster, Groups: groups}, {Name: "control-plane", State: planner.Pending}}}
	}
	left := step.Group{Steps: []step.Step{copySecret}}
	result := func(outcome events.Outcome, msg string, at time.Time) *events.ResultEvent {
		return &events.ResultEvent{Plan: "capi-quickstart", Revision: rev, Phase: "cluster", StepKey: copySecret.Key, Executor: step.Kube,
			Action: copySecret.Action, Target: copySecret.Target.String(), Outcome: outcome, Attempt: 1, Error: msg, Terminal: msg != "", At: at}
	}
	store := &memStore{}
	start := func(restore bool) (*StatusRecorder, context.CancelFunc) {
		rctx, stop := context.WithCancel(ctx)
		r := &StatusRecorder{Store: store, Approvals: bobApproved{}, Events: clusterevents.NewRecorder(rctx, cs, kube.Client)}
		if restore {
			if err := r.Restore(ctx, &Loop{}); err != nil {
				t.Fatal(err)
			}
		}
		return r, stop
	}
	at := time.Now().Add(-time.Hour).Truncate(time.Second)
	cycle := func() Cycle { at = at.Add(time.Minute); return Cycle{Revision: rev, At: at} }
	wait := func(what string, want map[string]int32) {
		t.Helper()
		for {
			list, err := clusterevents.List(ctx, kube.Client, "default/capi-quickstart")
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int32{}
			for _, e := range list {
				if _, dup := got[e.Reason]; dup {
					t.Fatalf("%s: two %s Events; a repeat must be counted on the first", what, e.Reason)
				}
				got[e.Reason] = e.Count
			}
			if fmt.Sprint(got) == fmt.Sprint(want) {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: events (reason: count) %v; want %v", what, got, want)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}

	r, stop := start(false)
	r.Planned(ctx, cycle(), "plans/capi-quickstart.yaml", "capi-quickstart", res(planner.Approved, left), []step.Step{copySecret})
	wait("the phase started", map[string]int32{"PhaseRunning": 1})
	list, err := clusterevents.List(ctx, kube.Client, "default/capi-quickstart")
	if err != nil {
		t.Fatal(err)
	}
	if e := list[0]; e.Type != "Normal" || e.Message != "Phase cluster is running (approved by bob in #1)" || e.Source.Component != "ferry-reconciler" {
		t.Errorf("PhaseRunning event: %s %q from %s", e.Type, e.Message, e.Source.Component)
	}

	r.Result(ctx, result(events.Failed, "admission denied: an outage", at.Add(10*time.Second)))
	// The next cycle sees the same: no transition, no Event. The events
	// are written in order, so the retry's waited for below shows it.
	r.Planned(ctx, cycle(), "plans/capi-quickstart.yaml", "capi-quickstart", res(planner.Approved, left), nil)
	r.Planned(ctx, cycle(), "plans/capi-quickstart.yaml", "capi-quickstart", res(planner.Approved, left), []step.Step{copySecret})
	wait("the failure and the retry", map[string]int32{"PhaseRunning": 2, "StepFailed": 1, "PhaseFailed": 1})
	if err := r.Flush(ctx, Cycle{Revision: rev, At: at}); err != nil {
		t.Fatal(err)
	}
	stop()

	// A restart from the recorded status: the cycle that finds the step
	// still in flight reports nothing; its success does.
	r, stop = start(true)
	r.Planned(ctx, cycle(), "plans/capi-quickstart.yaml", "capi-quickstart", res(planner.Approved, left), nil)
	r.Result(ctx, result(events.Succeeded, "", at.Add(10*time.Second)))
	wait("the success after a restart", map[string]int32{"PhaseRunning": 2, "StepFailed": 1, "PhaseFailed": 1, "PhaseSucceeded": 1})
	stop()

	// A restart that could not read the status: the current states once
	// more, counted on the Events already there.
	r, stop = start(false)
	defer stop()
	r.Planned(ctx, cycle(), "plans/capi-quickstart.yaml", "capi-quickstart", res(planner.Succeeded), nil)
	wait("a restart without the recorded status", map[string]int32{"PhaseRunning": 2, "StepFailed": 1, "PhaseFailed": 1, "PhaseSucceeded": 2})
}
