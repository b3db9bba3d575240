package executor_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/executor"
	"github.com/ferry-dev/ferry/internal/executor/workload"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// queue is one implementation of events.Queue under test, with how a
// step is published to it and its results read back.
type queue struct {
	q       events.Queue
	publish func(t *testing.T, ev *events.StepEvent)
	results func() []events.ResultEvent
}

// memoryQueue is the in-process queue.
func memoryQueue(*testing.T) queue {
	q := &events.MemoryQueue{}
	return queue{q: q, publish: func(_ *testing.T, ev *events.StepEvent) { q.Publish(ev) }, results: q.Results}
}

// jetStreamQueue is the queue on an embedded NATS server, its results
// read from FERRY_RESULTS.
func jetStreamQueue(t *testing.T) queue {
	n := testenv.StartNATS(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := events.EnsureStreams(ctx, n.JetStream); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []events.ResultEvent
	go func() {
		_ = events.RunResults(ctx, n.JetStream, "test", func(_ context.Context, r *events.ResultEvent) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, *r)
			return nil
		})
	}()
	return queue{
		q: events.JetStreamQueue{Conn: n.Conn, JS: n.JetStream},
		publish: func(t *testing.T, ev *events.StepEvent) {
			if _, err := (&events.Publisher{JS: n.JetStream}).PublishStep(ctx, ev); err != nil {
				t.Fatal(err)
			}
		},
		results: func() []events.ResultEvent {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(got)
		},
	}
}

// TestRunOverEitherQueue: Run carries out the steps of a real executor
// (the workload executor's probe, which needs no cluster) alike over the
// in-process queue and over JetStream: an application that answers 503
// first is probed again after the back-off, a result per attempt; a step
// whose URL is no URL fails for good at once.
func TestRunOverEitherQueue(t *testing.T) {
	for name, open := range map[string]func(*testing.T) queue{"memory": memoryQueue, "jetstream": jetStreamQueue} {
		t.Run(name, func(t *testing.T) {
			var calls atomic.Int32
			app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if calls.Add(1) == 1 {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				w.WriteHeader(http.StatusNoContent)
			}))
			defer app.Close()
			q := open(t)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- executor.Run(ctx, q.q, []executor.Executor{&workload.Executor{HTTPClient: app.Client()}},
					executor.RunOptions{MaxDeliver: 3, BackOff: 20 * time.Millisecond})
			}()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			}()

			in := &step.Inputs{Cluster: v1alpha1.ClusterRef{Namespace: "default", Name: "c1"}}
			probe := func(node, url string) *events.StepEvent {
				target := step.Target{Kind: step.Node, Name: node}
				return events.NewStepEvent("c1", "rev1", step.Step{Key: step.Key(v1alpha1.PhaseCutover, step.Probe, target), Phase: v1alpha1.PhaseCutover,
					Executor: step.Workload, Action: step.Probe, Target: target, Params: step.NewParams(step.ParamURL, url), Inputs: in}, time.Now())
			}
			q.publish(t, probe("old-0", app.URL))
			q.publish(t, probe("old-1", "ftp://nowhere"))

			want := map[string][]events.Outcome{
				"cutover/probe/node/old-0": {events.Retrying, events.Succeeded},
				"cutover/probe/node/old-1": {events.Failed},
			}
			var got map[string][]events.Outcome
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				got = map[string][]events.Outcome{}
				for _, r := range q.results() {
					got[r.StepKey] = append(got[r.StepKey], r.Outcome)
				}
				if len(got["cutover/probe/node/old-0"]) == 2 && len(got["cutover/probe/node/old-1"]) == 1 {
					break
				}
			}
			for key, outcomes := range want {
				if !slices.Equal(got[key], outcomes) {
					t.Errorf("%s: outcomes %v; want %v", key, got[key], outcomes)
				}
			}
			for _, r := range q.results() {
				if r.StepKey == "cutover/probe/node/old-1" && !r.Terminal {
					t.Errorf("a probe of no URL: %+v; want a terminal failure", r)
				}
			}
			if n := calls.Load(); n != 2 {
				t.Errorf("the application was probed %d times; want 2", n)
			}
		})
	}
}
