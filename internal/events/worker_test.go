package events_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// bus starts an embedded server with the streams in place.
func bus(t *testing.T) *testenv.NATS {
	t.Helper()
	n := testenv.StartNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := events.EnsureStreams(ctx, n.JetStream); err != nil {
		t.Fatal(err)
	}
	return n
}

func stepEvent(plan, key string) *events.StepEvent {
	return events.NewStepEvent(plan, "rev1", step.Step{Key: step.Key("cluster", "noop", step.Target{Kind: "X", Name: key}), Phase: "cluster", Executor: "test", Action: "noop",
		Target: step.Target{Kind: "X", Name: key}}, time.Now())
}

func publish(t *testing.T, js jetstream.JetStream, ev *events.StepEvent) bool {
	t.Helper()
	dup, err := (&events.Publisher{JS: js}).PublishStep(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	return dup
}

// results collects results from FERRY_RESULTS as they arrive.
type results struct {
	mu  sync.Mutex
	all []events.ResultEvent
}

func collect(t *testing.T, js jetstream.JetStream) *results {
	t.Helper()
	r := &results{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = events.RunResults(ctx, js, "test-results", func(_ context.Context, ev *events.ResultEvent) error {
			r.mu.Lock()
			r.all = append(r.all, *ev)
			r.mu.Unlock()
			return nil
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// wait polls until cond holds over the results, or fails after 20s.
func (r *results) wait(t *testing.T, what string, cond func([]events.ResultEvent) bool) []events.ResultEvent {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		all := append([]events.ResultEvent(nil), r.all...)
		r.mu.Unlock()
		if cond(all) {
			return all
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t.Fatalf("timed out waiting for %s; results: %+v", what, r.all)
	return nil
}

func outcomes(all []events.ResultEvent) []events.Outcome {
	var out []events.Outcome
	for _, r := range all {
		out = append(out, r.Outcome)
	}
	return out
}

func startWorker(t *testing.T, js jetstream.JetStream, opts events.WorkerOptions, h events.Handler) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(logging.With(context.Background(), quiet))
	done := make(chan error, 1)
	go func() { done <- events.RunWorker(ctx, js, opts, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
	return cancel
}

func TestStreamsIdempotent(t *testing.T) {
	n := bus(t)
	ctx := context.Background()
	if err := events.EnsureStreams(ctx, n.JetStream); err != nil {
		t.Fatalf("second EnsureStreams: %v", err)
	}
	s, err := n.JetStream.Stream(ctx, events.StreamSteps)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := s.CachedInfo().Config; cfg.Retention != jetstream.WorkQueuePolicy || cfg.Duplicates != events.DuplicateWindow {
		t.Errorf("FERRY_STEPS config = %+v", cfg)
	}
}

func TestPublishDeduplicates(t *testing.T) {
	n := bus(t)
	ev := stepEvent("p1", "a")
	if publish(t, n.JetStream, ev) {
		t.Fatal("first publish reported a duplicate")
	}
	if !publish(t, n.JetStream, ev) {
		t.Error("re-published step was not dropped as a duplicate")
	}
	s, _ := n.JetStream.Stream(context.Background(), events.StreamSteps)
	info, _ := s.Info(context.Background())
	if info.State.Msgs != 1 {
		t.Errorf("stream holds %d steps, want 1", info.State.Msgs)
	}
}

func TestWorkerSucceeds(t *testing.T) {
	n := bus(t)
	res := collect(t, n.JetStream)
	var calls atomic.Int32
	startWorker(t, n.JetStream, events.WorkerOptions{Kind: "test"}, func(_ context.Context, s *events.StepEvent) (events.Report, error) {
		calls.Add(1)
		return events.Report{Message: "did " + s.Step.Target.Name}, nil
	})
	publish(t, n.JetStream, stepEvent("p1", "a"))
	all := res.wait(t, "a success", func(all []events.ResultEvent) bool { return len(all) == 1 })
	if r := all[0]; r.Outcome != events.Succeeded || r.Message != "did a" || r.Attempt != 1 || r.StepKey != "cluster/noop/x/a" {
		t.Errorf("result = %+v", r)
	}
	waitEmpty(t, n.JetStream)
	if calls.Load() != 1 {
		t.Errorf("handler ran %d times", calls.Load())
	}
}

// waitEmpty waits until the work queue holds nothing: every step settled.
func waitEmpty(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	s, _ := js.Stream(context.Background(), events.StreamSteps)
	for i := 0; i < 200; i++ {
		info, _ := s.Info(context.Background())
		if info.State.Msgs == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Error("steps left in the work queue")
}

// TestRedeliveryAfterCrash: an executor takes a step and dies without an
// ack; after AckWait the step is redelivered to a live one, and its effect
// happens exactly once.
func TestRedeliveryAfterCrash(t *testing.T) {
	n := bus(t)
	res := collect(t, n.JetStream)
	ctx := context.Background()
	opts := events.WorkerOptions{Kind: "test", AckWait: 500 * time.Millisecond}
	// The crashing executor: its own connection takes the step from the
	// shared consumer and goes away.
	crashed, err := nats.Connect(n.URL)
	if err != nil {
		t.Fatal(err)
	}
	cjs, _ := jetstream.New(crashed)
	cons, err := cjs.CreateOrUpdateConsumer(ctx, events.StreamSteps, jetstream.ConsumerConfig{
		Durable: events.ConsumerName("test"), FilterSubject: events.StepsPrefix + "test.>",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: opts.AckWait, MaxDeliver: 5, MaxAckPending: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, n.JetStream, stepEvent("p1", "a"))
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for range batch.Messages() {
		// Taken, never acked.
	}
	crashed.Close()

	var effects sync.Map // create-if-absent: the effect of the step
	var applied atomic.Int32
	startWorker(t, n.JetStream, opts, func(_ context.Context, s *events.StepEvent) (events.Report, error) {
		if _, loaded := effects.LoadOrStore(s.Step.Target.Name, true); !loaded {
			applied.Add(1)
		}
		return events.Report{}, nil
	})
	all := res.wait(t, "the redelivered step to succeed", func(all []events.ResultEvent) bool { return len(all) == 1 })
	if all[0].Attempt != 2 || all[0].Outcome != events.Succeeded {
		t.Errorf("result = %+v; want attempt 2 succeeded", all[0])
	}
	waitEmpty(t, n.JetStream)
	if applied.Load() != 1 {
		t.Errorf("effect applied %d times, want 1", applied.Load())
	}
}

// TestFailsAfterMaxDeliver: a step that keeps failing is retried with
// back-off and reported Failed, with its error, on the last delivery.
func TestFailsAfterMaxDeliver(t *testing.T) {
	n := bus(t)
	res := collect(t, n.JetStream)
	var calls atomic.Int32
	startWorker(t, n.JetStream, events.WorkerOptions{Kind: "test", MaxDeliver: 3, BackOff: 10 * time.Millisecond},
		func(context.Context, *events.StepEvent) (events.Report, error) {
			calls.Add(1)
			return events.Report{}, errors.New("connection refused")
		})
	publish(t, n.JetStream, stepEvent("p1", "a"))
	all := res.wait(t, "the step to fail", func(all []events.ResultEvent) bool {
		return len(all) > 0 && all[len(all)-1].Outcome == events.Failed
	})
	want := []events.Outcome{events.Retrying, events.Retrying, events.Failed}
	if got := outcomes(all); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("outcomes %v, want %v", got, want)
	}
	last := all[len(all)-1]
	if last.Attempt != 3 || last.Error != "gave up after 3 attempts: connection refused" || last.Terminal {
		t.Errorf("last result = %+v", last)
	}
	waitEmpty(t, n.JetStream)
	if calls.Load() != 3 {
		t.Errorf("handler ran %d times, want 3", calls.Load())
	}
}

func TestTerminalErrorIsNotRetried(t *testing.T) {
	n := bus(t)
	res := collect(t, n.JetStream)
	var calls atomic.Int32
	startWorker(t, n.JetStream, events.WorkerOptions{Kind: "test", BackOff: 10 * time.Millisecond},
		func(context.Context, *events.StepEvent) (events.Report, error) {
			calls.Add(1)
			return events.Report{}, failure.Terminal(errors.New("credentials refused"))
		})
	publish(t, n.JetStream, stepEvent("p1", "a"))
	all := res.wait(t, "the step to fail", func(all []events.ResultEvent) bool { return len(all) == 1 })
	if r := all[0]; r.Outcome != events.Failed || !r.Terminal || r.Error != "credentials refused" {
		t.Errorf("result = %+v", r)
	}
	waitEmpty(t, n.JetStream)
	time.Sleep(100 * time.Millisecond)
	if calls.Load() != 1 {
		t.Errorf("handler ran %d times, want 1", calls.Load())
	}
}

// TestInProgressKeepsLongStepsAlive: a step that runs three times AckWait
// is not redelivered meanwhile.
func TestInProgressKeepsLongStepsAlive(t *testing.T) {
	n := bus(t)
	res := collect(t, n.JetStream)
	var calls atomic.Int32
	startWorker(t, n.JetStream, events.WorkerOptions{Kind: "test", AckWait: 300 * time.Millisecond},
		func(ctx context.Context, _ *events.StepEvent) (events.Report, error) {
			calls.Add(1)
			time.Sleep(900 * time.Millisecond)
			return events.Report{}, nil
		})
	publish(t, n.JetStream, stepEvent("p1", "a"))
	all := res.wait(t, "the long step", func(all []events.ResultEvent) bool { return len(all) == 1 })
	if all[0].Attempt != 1 || calls.Load() != 1 {
		t.Errorf("attempt %d, %d calls; want 1 and 1", all[0].Attempt, calls.Load())
	}
}

// TestReplicasSplitWork: two executor replicas on one consumer share the
// steps, and no step is handled twice.
func TestReplicasSplitWork(t *testing.T) {
	n := bus(t)
	res := collect(t, n.JetStream)
	var mu sync.Mutex
	seen := map[string]string{}
	var dup atomic.Int32
	handler := func(replica string) events.Handler {
		return func(_ context.Context, s *events.StepEvent) (events.Report, error) {
			mu.Lock()
			if _, ok := seen[s.ID]; ok {
				dup.Add(1)
			}
			seen[s.ID] = replica
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			return events.Report{}, nil
		}
	}
	startWorker(t, n.JetStream, events.WorkerOptions{Kind: "test", Concurrency: 2}, handler("a"))
	startWorker(t, n.JetStream, events.WorkerOptions{Kind: "test", Concurrency: 2}, handler("b"))
	const steps = 60
	for i := range steps {
		publish(t, n.JetStream, stepEvent("p1", fmt.Sprint(i)))
	}
	res.wait(t, "all steps", func(all []events.ResultEvent) bool { return len(all) == steps })
	mu.Lock()
	defer mu.Unlock()
	per := map[string]int{}
	for _, r := range seen {
		per[r]++
	}
	if len(seen) != steps || dup.Load() != 0 || per["a"] == 0 || per["b"] == 0 {
		t.Errorf("%d steps handled, %d twice, per replica %v", len(seen), dup.Load(), per)
	}
}

// TestWorkerTerminatesAnOlderStepType: a step event of type step.v1,
// which carried the whole plan and no inputs, is terminated by an executor
// of step.v2 without running it (it would run without its inputs);
// the step.v2 event after it runs.
func TestWorkerTerminatesAnOlderStepType(t *testing.T) {
	n := bus(t)
	res := collect(t, n.JetStream)
	var ran []string
	var mu sync.Mutex
	startWorker(t, n.JetStream, events.WorkerOptions{Kind: "test"}, func(_ context.Context, s *events.StepEvent) (events.Report, error) {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, s.Step.Target.Name)
		return events.Report{}, nil
	})
	old := `{"type":"ferry.dev/step.v1","id":"0001","plan":"p1","revision":"rev1","step":{"key":"cluster/noop/x/old","phase":"cluster","executor":"test","action":"noop","target":{"kind":"X","name":"old"}},"spec":{"metadata":{"name":"p1"}}}`
	if _, err := n.JetStream.Publish(context.Background(), events.StepSubject("test", "p1"), []byte(old)); err != nil {
		t.Fatal(err)
	}
	publish(t, n.JetStream, stepEvent("p1", "new"))
	res.wait(t, "the new step's result", func(all []events.ResultEvent) bool { return len(all) == 1 })
	waitEmpty(t, n.JetStream)
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != 1 || ran[0] != "new" {
		t.Errorf("ran %v; want only the step.v2 event's step", ran)
	}
}
