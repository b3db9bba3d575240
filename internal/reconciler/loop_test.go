package reconciler

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/planfile"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// These tests drive the loop's decisions with its boundaries replaced: a
// repository in memory, a fixed snapshot, a publisher that records. The
// loop against the real Git server, NATS and API servers is in
// run_test.go.

type memSource struct {
	mu   sync.Mutex
	rev  string
	tree fstest.MapFS
}

func (m *memSource) Poll(context.Context) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rev, true, nil
}

func (m *memSource) FS(string) (fs.FS, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tree, nil
}

func (m *memSource) set(rev string, files map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rev, m.tree = rev, fstest.MapFS{}
	for name, data := range files {
		m.tree[name] = &fstest.MapFile{Data: []byte(data)}
	}
}

type fixedObserver struct {
	snap    observed.Snapshot
	records []observed.Record
}

func (o *fixedObserver) Observe(_ context.Context, _ *v1alpha1.MigrationPlan, r observed.Record) (*observed.Snapshot, error) {
	o.records = append(o.records, r)
	s := o.snap
	s.Record = r
	return &s, nil
}

func (o *fixedObserver) Forget(string, step.Kind) {}

type recordingPublisher struct{ steps []*events.StepEvent }

func (p *recordingPublisher) PublishStep(_ context.Context, ev *events.StepEvent) (bool, error) {
	p.steps = append(p.steps, ev)
	return false, nil
}

type recorder struct {
	invalid, removed []string
	planned          map[string]*planner.Result
}

func (r *recorder) Planned(_ context.Context, _ Cycle, _, plan string, res *planner.Result, _ []step.Step) {
	if r.planned == nil {
		r.planned = map[string]*planner.Result{}
	}
	r.planned[plan] = res
}
func (r *recorder) Invalid(_ context.Context, _ Cycle, file, plan string, _ planfile.Errors) {
	r.invalid = append(r.invalid, file+"="+plan)
}
func (r *recorder) Unobserved(context.Context, Cycle, string, string, error) {}
func (r *recorder) Removed(_ context.Context, _ Cycle, plan string) {
	r.removed = append(r.removed, plan)
}
func (r *recorder) Result(context.Context, *events.ResultEvent) {}
func (r *recorder) Flush(context.Context, Cycle) error          { return nil }

// adoptSecrets are the Secrets a seed 000 cluster has before adoption.
func adoptSecrets() []observed.Secret {
	var secrets []observed.Secret
	for _, s := range observed.AdoptSecrets {
		secrets = append(secrets, observed.Secret{Namespace: "default", Name: "capi-quickstart-" + s, Keys: []string{"value"}, Cluster: "capi-quickstart"})
	}
	return append(secrets, observed.Secret{Namespace: "ferry-system", Name: "openstack-credentials", Keys: []string{"cacert", "clouds.yaml"}})
}

func TestLoopDecisions(t *testing.T) {
	ctx := context.Background()
	src := &memSource{}
	src.set("rev1", map[string]string{
		"plans/capi-quickstart.yaml": testenv.ExamplePlan(t, "cluster"),
		"plans/broken.yaml":          "apiVersion: ferry.dev/v1alpha1\nkind: MigrationPlan\n",
	})
	obs := &fixedObserver{snap: observed.Snapshot{Secrets: adoptSecrets()}}
	pub := &recordingPublisher{}
	rec := &recorder{}
	l := &Loop{Source: src, Observer: obs, Publisher: pub, Recorder: rec, Now: func() time.Time { return time.Unix(0, 0) }}

	// A broken file is reported; the good plan publishes its first group.
	if err := l.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if len(rec.invalid) != 1 || rec.invalid[0] != "plans/broken.yaml=" {
		t.Errorf("invalid files = %v", rec.invalid)
	}
	if len(pub.steps) == 0 || pub.steps[0].Step.Phase != "cluster" {
		t.Fatalf("published %d steps", len(pub.steps))
	}
	first := len(pub.steps)

	// While that group is in flight nothing more is published.
	if err := l.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if len(pub.steps) != first {
		t.Fatalf("published %d more steps while a group was in flight", len(pub.steps)-first)
	}

	// One step fails for good: once the group is settled it is not
	// published again at this revision, the others are.
	failedKey := pub.steps[0].Step.Key
	for i, ev := range pub.steps[:first] {
		out := events.Succeeded
		if i == 0 {
			out = events.Failed
		}
		_ = l.OnResult(ctx, &events.ResultEvent{Type: events.TypeResult, StepID: ev.ID, Plan: ev.Plan, Revision: ev.Revision, StepKey: ev.Step.Key, Outcome: out})
	}
	if err := l.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ev := range pub.steps[first:] {
		if ev.Step.Key == failedKey {
			t.Errorf("step %s that failed at rev1 was published again at rev1", failedKey)
		}
	}
	// A new revision retries it.
	src.set("rev2", map[string]string{"plans/capi-quickstart.yaml": testenv.ExamplePlan(t, "cluster")})
	for _, ev := range pub.steps[first:] {
		_ = l.OnResult(ctx, &events.ResultEvent{StepID: ev.ID, Plan: ev.Plan, Revision: ev.Revision, StepKey: ev.Step.Key, Outcome: events.Succeeded})
	}
	before := len(pub.steps)
	if err := l.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	retried := false
	for _, ev := range pub.steps[before:] {
		retried = retried || (ev.Step.Key == failedKey && ev.Revision == "rev2")
	}
	if !retried {
		t.Errorf("step %s not retried at a new revision", failedKey)
	}
	if got := obs.records[len(obs.records)-1].Approved; got != "cluster" {
		t.Errorf("record.Approved = %q, want cluster", got)
	}

	// A probe that passed is remembered for the planner.
	_ = l.OnResult(ctx, &events.ResultEvent{Plan: "capi-quickstart", StepKey: "cutover/probe/node/n1", Outcome: events.Succeeded})
	_ = l.Cycle(ctx)
	if got := obs.records[len(obs.records)-1].Checks; len(got) != 1 || got[0] != "cutover/probe/node/n1" {
		t.Errorf("record.Checks = %v", got)
	}

	// The plan's file breaks: its plan waits (not removed), nothing runs.
	src.set("rev2b", map[string]string{"plans/capi-quickstart.yaml": strings.Replace(testenv.ExamplePlan(t, "cluster"), "strategy: adopt", "strategy: adoptt", 1)})
	before = len(pub.steps)
	_ = l.Cycle(ctx)
	if got := rec.invalid[len(rec.invalid)-1]; got != "plans/capi-quickstart.yaml=capi-quickstart" || len(rec.removed) != 0 || len(pub.steps) != before {
		t.Errorf("after the file broke: invalid %v, removed %v, %d steps published", rec.invalid, rec.removed, len(pub.steps)-before)
	}

	// The plan's file leaves the branch: reported once, nothing published.
	src.set("rev3", map[string]string{"plans/README.md": "no plans"})
	before = len(pub.steps)
	_ = l.Cycle(ctx)
	_ = l.Cycle(ctx)
	if len(rec.removed) != 1 || rec.removed[0] != "capi-quickstart" || len(pub.steps) != before {
		t.Errorf("removed = %v, %d steps published after removal", rec.removed, len(pub.steps)-before)
	}
}

// TestLoopSkipsSettledPlans: a plan with nothing to run is not observed
// again until something may have changed: an informer event about its
// cluster (or of unknown cluster) in a namespace it reads, a new revision,
// or Resync.
func TestLoopSkipsSettledPlans(t *testing.T) {
	ctx := context.Background()
	src := &memSource{}
	src.set("rev1", map[string]string{"plans/capi-quickstart.yaml": testenv.ExamplePlan(t, "")})
	obs := &fixedObserver{snap: observed.Snapshot{Secrets: adoptSecrets()}}
	now := time.Unix(0, 0)
	l := &Loop{Source: src, Observer: obs, Publisher: &recordingPublisher{}, Recorder: &recorder{},
		Now: func() time.Time { return now }}
	cycle := func() int {
		t.Helper()
		before := len(obs.records)
		if err := l.Cycle(ctx); err != nil {
			t.Fatal(err)
		}
		return len(obs.records) - before
	}
	if n := cycle(); n != 1 {
		t.Fatalf("first cycle observed %d times", n)
	}
	if n := cycle(); n != 0 {
		t.Errorf("an idle cycle observed a settled plan %d times", n)
	}
	l.Changed("kube-system", "")
	if n := cycle(); n != 0 {
		t.Errorf("a change in another namespace got the plan observed")
	}
	l.Changed("default", "another-cluster")
	if n := cycle(); n != 0 {
		t.Errorf("a change to another cluster in the plan's namespace got the plan observed")
	}
	l.Changed("default", "capi-quickstart")
	if n := cycle(); n != 1 {
		t.Errorf("a change to the plan's cluster: observed %d times, want 1", n)
	}
	l.Changed("ferry-system", "")
	if n := cycle(); n != 1 {
		t.Errorf("a change of unknown cluster in a namespace the plan reads Secrets from: observed %d times, want 1", n)
	}
	now = now.Add(11 * time.Minute)
	if n := cycle(); n != 1 {
		t.Errorf("after Resync: observed %d times, want 1", n)
	}
	src.set("rev2", map[string]string{"plans/capi-quickstart.yaml": testenv.ExamplePlan(t, "")})
	if n := cycle(); n != 1 {
		t.Errorf("a new revision: observed %d times, want 1", n)
	}
}

// instantPublisher runs each step at once, successfully: its result
// reaches the loop before PublishStep returns, as it may when an executor
// is quicker than JetStream's acknowledgement.
type instantPublisher struct {
	loop  *Loop
	steps []*events.StepEvent
}

func (p *instantPublisher) PublishStep(ctx context.Context, ev *events.StepEvent) (bool, error) {
	p.steps = append(p.steps, ev)
	return false, p.loop.OnResult(ctx, &events.ResultEvent{Type: events.TypeResult, StepID: ev.ID, Plan: ev.Plan,
		Revision: ev.Revision, StepKey: ev.Step.Key, Executor: ev.Step.Executor, Outcome: events.Succeeded})
}

// TestResultBeforePublishReturns: a step whose result came before its
// publication returned is not left in flight, where it would hold the
// plan's next steps back until StaleAfter.
func TestResultBeforePublishReturns(t *testing.T) {
	ctx := context.Background()
	src := &memSource{}
	src.set("rev1", map[string]string{"plans/capi-quickstart.yaml": testenv.ExamplePlan(t, "cluster")})
	now := time.Unix(0, 0)
	l := &Loop{Source: src, Observer: &fixedObserver{snap: observed.Snapshot{Secrets: adoptSecrets()}}, Recorder: &recorder{},
		Now: func() time.Time { return now }}
	pub := &instantPublisher{loop: l}
	l.Publisher = pub
	if err := l.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	first := len(pub.steps)
	if first == 0 {
		t.Fatal("nothing published")
	}
	// The observer never shows the steps' effect: once the results are
	// older than cacheLag, the loop publishes them again, unless it
	// wrongly believes them still in flight.
	now = now.Add(cacheLag + time.Second)
	if err := l.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if again := len(pub.steps) - first; again == 0 {
		t.Errorf("no step published after the first group's results: the plan is held as busy (%d steps in flight)", len(l.plans["capi-quickstart"].inFlight))
	}
}

// slowVerifier cannot tell an approval until told, as a forge that has
// not recorded a merge yet.
type slowVerifier struct{ known bool }

func (v *slowVerifier) Verify(context.Context, string, string, string) (Verdict, error) {
	if !v.known {
		return Verdict{}, errors.New("the forge has not said yet")
	}
	return Verdict{OK: true}, nil
}

func (v *slowVerifier) VerifyContent(ctx context.Context, rev, file string, _ []string) (Verdict, error) {
	return v.Verify(ctx, rev, file, "")
}

// TestLoopAsksAgainForUnverifiedApprovals: an approval that cannot be
// verified yet runs nothing and leaves the plan unsettled, so that an
// idle cycle asks again and acts once the answer comes, without a new
// commit or a change in the cluster.
func TestLoopAsksAgainForUnverifiedApprovals(t *testing.T) {
	ctx := context.Background()
	src := &memSource{}
	src.set("rev1", map[string]string{"plans/capi-quickstart.yaml": testenv.ExamplePlan(t, "cluster")})
	obs := &fixedObserver{snap: observed.Snapshot{Secrets: adoptSecrets()}}
	pub, v := &recordingPublisher{}, &slowVerifier{}
	l := &Loop{Source: src, Observer: obs, Publisher: pub, Recorder: &recorder{}, Verifier: v}
	for i := range 2 {
		if err := l.Cycle(ctx); err != nil {
			t.Fatal(err)
		}
		if len(pub.steps) != 0 || len(obs.records) != i+1 {
			t.Fatalf("cycle %d while unverified: %d steps published, observed %d times; want none and every cycle", i+1, len(pub.steps), len(obs.records))
		}
	}
	v.known = true
	if err := l.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if len(pub.steps) == 0 {
		t.Errorf("once verified, the idle cycle published nothing")
	}
}

// TestKeypairsFromHistory: what a rollback may delete is what the history
// store says ferry created: a keypair the status branch lists (an edit of
// ferry/status, restored after a restart) but no step's result reported
// created is not in the record the plan is observed and planned with.
func TestKeypairsFromHistory(t *testing.T) {
	ctx := context.Background()
	src := &memSource{}
	src.set("rev1", map[string]string{"plans/capi-quickstart.yaml": testenv.ExamplePlan(t, "cluster")})
	obs := &fixedObserver{snap: observed.Snapshot{Secrets: adoptSecrets()}}
	hist := &memHistory{}
	l := &Loop{Source: src, Observer: obs, Publisher: &recordingPublisher{}, History: hist}
	l.Restore("capi-quickstart", observed.Record{Approved: "cluster", Keypairs: []string{"capi-key", "someone-elses-key"}})
	if err := l.OnResult(ctx, &events.ResultEvent{Plan: "capi-quickstart", StepID: "x", StepKey: "cluster/ensure-keypair/keypair/capi-key",
		Outcome: events.Succeeded, Report: events.Report{Created: []events.Resource{{Kind: events.ResourceKeypair, Name: "capi-key"}}}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if len(obs.records) == 0 {
		t.Fatal("the plan was not observed")
	}
	if got := obs.records[len(obs.records)-1].Keypairs; !slices.Equal(got, []string{"capi-key"}) {
		t.Errorf("keypairs in the record planned with: %v; want [capi-key] (someone-elses-key is on the status branch only)", got)
	}
	if got := hist.mark.Keypairs["capi-quickstart"]; !slices.Equal(got, []string{"capi-key"}) {
		t.Errorf("keypairs in the history store: %v; want [capi-key]", got)
	}
}
