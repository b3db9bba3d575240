package reconciler

import (
	"context"
	"io/fs"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// pollCounter is a memSource that counts polls.
type pollCounter struct {
	memSource
	polls atomic.Int32
}

func (p *pollCounter) Poll(ctx context.Context) (string, bool, error) {
	p.polls.Add(1)
	return p.memSource.Poll(ctx)
}

// syncObserver is a fixedObserver for concurrent use.
type syncObserver struct {
	mu sync.Mutex
	fixedObserver
}

func (o *syncObserver) Observe(ctx context.Context, p *v1alpha1.MigrationPlan, r observed.Record) (*observed.Snapshot, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.fixedObserver.Observe(ctx, p, r)
}

func (o *syncObserver) observations() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.records)
}

// syncPublisher is a recordingPublisher for concurrent use.
type syncPublisher struct {
	mu sync.Mutex
	recordingPublisher
}

func (p *syncPublisher) PublishStep(ctx context.Context, ev *events.StepEvent) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.recordingPublisher.PublishStep(ctx, ev)
}

func (p *syncPublisher) published() []*events.StepEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.steps)
}

// TestRunReconcilesOnResults: Run polls the repository once per interval;
// in between, a step's result and an informer event about a plan's
// cluster get that plan reconciled at once, without a poll.
func TestRunReconcilesOnResults(t *testing.T) {
	src := &pollCounter{}
	src.set("rev1", map[string]string{"plans/capi-quickstart.yaml": testenv.ExamplePlan(t, "cluster")})
	obs := &syncObserver{fixedObserver: fixedObserver{snap: observed.Snapshot{Secrets: adoptSecrets()}}}
	pub := &syncPublisher{}
	l := &Loop{Source: src, Observer: obs, Publisher: pub}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { _ = l.Run(ctx, time.Hour); close(done) }()
	defer func() { cancel(); <-done }()
	eventually := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10s", what)
			}
		}
	}
	eventually("the first group published", func() bool { return len(pub.published()) > 0 })
	before := obs.observations()
	for _, ev := range pub.published() {
		if err := l.OnResult(ctx, &events.ResultEvent{StepID: ev.ID, Plan: ev.Plan, Revision: ev.Revision, StepKey: ev.Step.Key,
			Executor: ev.Step.Executor, Outcome: events.Succeeded}); err != nil {
			t.Fatal(err)
		}
	}
	eventually("the plan observed after its results", func() bool { return obs.observations() > before })
	before = obs.observations()
	l.Changed("default", "capi-quickstart")
	eventually("the plan observed after an informer event", func() bool { return obs.observations() > before })
	if n := src.polls.Load(); n != 1 {
		t.Errorf("the repository was polled %d times, want once (interval 1h, no Wake)", n)
	}
}

// treeObserver records the manifest file each observation's context
// carries.
type treeObserver struct {
	fixedObserver
	mu   sync.Mutex
	seen []string
}

func (o *treeObserver) Observe(ctx context.Context, p *v1alpha1.MigrationPlan, r observed.Record) (*observed.Snapshot, error) {
	seen := "no tree"
	if fsys := observed.Repo(ctx); fsys != nil {
		b, _ := fs.ReadFile(fsys, "manifests/ccm.yaml")
		seen = string(b)
	}
	o.mu.Lock()
	o.seen = append(o.seen, seen)
	o.mu.Unlock()
	return o.fixedObserver.Observe(ctx, p, r)
}

// TestReconcileReadsItsRevision: each reconcile observes with the tree of
// the revision it plans (the observer's tree was once swapped for all
// workers at each pass).
func TestReconcileReadsItsRevision(t *testing.T) {
	src := &memSource{}
	obs := &treeObserver{fixedObserver: fixedObserver{snap: observed.Snapshot{Secrets: adoptSecrets()}}}
	l := &Loop{Source: src, Observer: obs, Publisher: &recordingPublisher{}, Now: func() time.Time { return time.Unix(0, 0) }}
	for _, rev := range []string{"r1", "r2"} {
		src.set(rev, map[string]string{"plans/capi-quickstart.yaml": testenv.ExamplePlan(t, ""), "manifests/ccm.yaml": "ccm at " + rev})
		if err := l.Cycle(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"ccm at r1", "ccm at r2"}; !slices.Equal(obs.seen, want) {
		t.Errorf("observations read %q; want %q", obs.seen, want)
	}
}
