package reconciler

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestLoopRollback: a rollback's steps are published like any others but
// do not move the furthest phase acted on; once nothing of the undone
// phases is left, the loop remembers that nothing after the kept phase
// was acted on, so that approving it again migrates forward. A keypair an
// executor reports created is remembered for the planner.
func TestLoopRollback(t *testing.T) {
	ctx := context.Background()
	src := &memSource{}
	plan := strings.Replace(testenv.ExamplePlan(t, ""), `approve: ""`, "approve: \"\"\n  rollback: {to: none}", 1)
	src.set("rev1", map[string]string{"plans/capi-quickstart.yaml": plan})
	obs := &fixedObserver{snap: observed.Snapshot{
		Secrets:  adoptSecrets(),
		Workload: &observed.Workload{},
		Cluster:  &observed.Cluster{InfrastructureRef: observed.Ref{Kind: step.OpenStackCluster, Name: "capi-quickstart"}},
		Created:  []observed.Created{{Kind: step.MachineDeployment, Name: "capi-quickstart-md-0", Phase: "workers"}},
	}}
	pub := &recordingPublisher{}
	l := &Loop{Source: src, Observer: obs, Publisher: pub, Recorder: &recorder{}, Now: func() time.Time { return time.Unix(0, 0) }}
	l.Restore("capi-quickstart", observed.Record{Approved: "workers"})
	_ = l.OnResult(ctx, &events.ResultEvent{Plan: "capi-quickstart", StepKey: "cluster/ensure-keypair/keypair/capi-key", Outcome: events.Succeeded,
		Report: events.Report{Created: []events.Resource{{Kind: events.ResourceKeypair, Name: "capi-key"}}}})

	if err := l.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if len(pub.steps) != 1 || pub.steps[0].Step.Key != "workers/pause/cluster/capi-quickstart" {
		t.Fatalf("published %d steps, first %v; want the undo of workers to pause the Cluster first", len(pub.steps), pub.steps)
	}
	if r := obs.records[len(obs.records)-1]; r.Approved != "workers" || len(r.Keypairs) != 1 || r.Keypairs[0] != "capi-key" {
		t.Errorf("record while rolling back = %+v; want approved workers and keypair capi-key", r)
	}
	_ = l.OnResult(ctx, &events.ResultEvent{StepID: pub.steps[0].ID, Plan: "capi-quickstart", StepKey: pub.steps[0].Step.Key, Outcome: events.Succeeded})

	// Nothing of ferry's is left: the rollback is done.
	obs.snap.Created, obs.snap.Cluster = nil, nil
	if err := l.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if res := l.Recorder.(*recorder).planned["capi-quickstart"]; !res.RolledBack {
		t.Fatalf("the planner does not see the rollback done: %+v", res.Phases)
	}
	if r := l.record("capi-quickstart"); r.Approved != "" {
		t.Errorf("record after the rollback: approved %q, want nothing", r.Approved)
	}
}
