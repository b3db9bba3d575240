package events_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/events"
)

// TestReplayResults: a reconciler that took and acked a step's result and
// was killed before acting on it leaves nothing for its successor on the
// durable consumer, and the step published again is dropped as a
// duplicate; ReplayResults gives the successor that result, and only the
// results since the time asked.
func TestReplayResults(t *testing.T) {
	n := bus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Nothing to replay on an empty stream.
	if got, err := events.ReplayResults(ctx, n.JetStream, time.Now().Add(-time.Hour), nil); err != nil || got != 0 {
		t.Fatalf("replay on an empty stream = %d, %v", got, err)
	}
	pub := &events.Publisher{JS: n.JetStream}
	result := func(key string) *events.ResultEvent {
		s := stepEvent("p1", key)
		return &events.ResultEvent{Type: events.TypeResult, StepID: s.ID, Plan: "p1", Revision: "rev1", StepKey: s.Step.Key, Outcome: events.Succeeded, Attempt: 1}
	}
	if err := pub.PublishResult(ctx, result("old")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	since := time.Now()
	ev := stepEvent("p1", "a")
	publish(t, n.JetStream, ev)
	if err := pub.PublishResult(ctx, result("a")); err != nil {
		t.Fatal(err)
	}

	// The predecessor acks both results, then dies.
	first := collect(t, n.JetStream)
	first.wait(t, "the predecessor to take the results", func(all []events.ResultEvent) bool { return len(all) == 2 })

	// The successor publishes the step again: dropped, and the durable
	// consumer has nothing more for it.
	if !publish(t, n.JetStream, ev) {
		t.Fatal("the step published again was not dropped as a duplicate")
	}
	var mu sync.Mutex
	var durable []string
	cctx, stop := context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	_ = events.RunResults(cctx, n.JetStream, "test-results", func(_ context.Context, r *events.ResultEvent) error {
		mu.Lock()
		durable = append(durable, r.StepKey)
		mu.Unlock()
		return nil
	})
	if len(durable) != 0 {
		t.Fatalf("the durable consumer delivered %v again; the test's premise is gone", durable)
	}

	var replayed []string
	got, err := events.ReplayResults(ctx, n.JetStream, since, func(_ context.Context, r *events.ResultEvent) error {
		replayed = append(replayed, r.StepID)
		return nil
	})
	if err != nil || got != 1 || len(replayed) != 1 || replayed[0] != ev.ID {
		t.Errorf("replay since the step's publication = %d %v, %v; want its result (%s) only", got, replayed, err, ev.ID)
	}
}
