package events

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/step"
)

// Queue is the side of the bus an executor replica works from: the steps
// of an executor kind, each attempt's result reported, and the steps
// whose deliveries all died reported too. executor.Run takes one.
// JetStreamQueue is ferry's, on NATS; MemoryQueue is one process's.
type Queue interface {
	// Work runs handler on the steps of opts.Kind, reporting a result per
	// attempt (Succeeded, Retrying after a retryable error, Failed after a
	// terminal one or on the last attempt), until ctx ends; steps still
	// running then are handed back, not lost.
	Work(ctx context.Context, opts WorkerOptions, handler Handler) error
	// WatchLost reports Failed every step whose deliveries all died
	// without a result, until ctx ends.
	WatchLost(ctx context.Context) error
}

// JetStreamQueue is Queue on NATS JetStream, over the streams of
// EnsureStreams: RunWorker and WatchMaxDeliveries.
type JetStreamQueue struct {
	Conn *nats.Conn
	JS   jetstream.JetStream
}

var (
	_ Queue = JetStreamQueue{}
	_ Queue = (*MemoryQueue)(nil)
)

// Work is RunWorker.
func (q JetStreamQueue) Work(ctx context.Context, opts WorkerOptions, handler Handler) error {
	return RunWorker(ctx, q.JS, opts, handler)
}

// WatchLost is WatchMaxDeliveries.
func (q JetStreamQueue) WatchLost(ctx context.Context) error {
	return WatchMaxDeliveries(ctx, q.Conn, q.JS)
}

// MemoryQueue is Queue in one process, without NATS: Publish queues a
// step for its executor kind, Work runs it with the outcomes it has on
// JetStream (a result per attempt; a retryable error retried after
// WorkerOptions' back-off, up to MaxDeliver attempts; a terminal error
// or the last attempt Failed), and Results reads them back. A delivery
// dies only with the process, and nothing outlives it: it is for tests
// and for a process that runs its executors alone. The zero value is
// ready to use.
type MemoryQueue struct {
	mu      sync.Mutex
	pending map[step.Kind][]*StepEvent
	wake    map[step.Kind]chan struct{}
	ids     map[string]bool
	results []ResultEvent
}

// Publish queues a step for the worker of its executor kind. A step
// whose ID the queue had is dropped, as JetStream drops one within its
// duplicate window: duplicate is true then.
func (q *MemoryQueue) Publish(ev *StepEvent) (duplicate bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ids == nil {
		q.ids = map[string]bool{}
	}
	if q.ids[ev.ID] {
		return true
	}
	q.ids[ev.ID] = true
	q.push(ev, false)
	return false
}

// Results returns every result reported so far, in order.
func (q *MemoryQueue) Results() []ResultEvent {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]ResultEvent(nil), q.results...)
}

// push adds ev to its kind's queue, first when it is handed back. The
// caller holds mu.
func (q *MemoryQueue) push(ev *StepEvent, first bool) {
	kind := ev.Step.Executor
	if q.pending == nil {
		q.pending = map[step.Kind][]*StepEvent{}
	}
	if first {
		q.pending[kind] = append([]*StepEvent{ev}, q.pending[kind]...)
	} else {
		q.pending[kind] = append(q.pending[kind], ev)
	}
	select {
	case q.wakeOf(kind) <- struct{}{}:
	default:
	}
}

// wakeOf is the channel that tells kind's worker a step is queued. The
// caller holds mu.
func (q *MemoryQueue) wakeOf(kind step.Kind) chan struct{} {
	if q.wake == nil {
		q.wake = map[step.Kind]chan struct{}{}
	}
	if q.wake[kind] == nil {
		q.wake[kind] = make(chan struct{}, 1)
	}
	return q.wake[kind]
}

// next takes the first step queued for kind, or nil.
func (q *MemoryQueue) next(kind step.Kind) (*StepEvent, chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	wake := q.wakeOf(kind)
	if len(q.pending[kind]) == 0 {
		return nil, wake
	}
	ev := q.pending[kind][0]
	q.pending[kind] = q.pending[kind][1:]
	return ev, wake
}

// Work runs handler on the steps of opts.Kind until ctx ends, at most
// opts.Concurrency at once besides opts.Waits wait steps.
func (q *MemoryQueue) Work(ctx context.Context, opts WorkerOptions, handler Handler) error {
	opts.defaults()
	if opts.Kind == "" {
		return errors.New("run worker: no executor kind")
	}
	slots, waits := make(chan struct{}, opts.Concurrency), make(chan struct{}, opts.Waits)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		ev, wake := q.next(opts.Kind)
		if ev == nil {
			select {
			case <-ctx.Done():
				return nil
			case <-wake:
				continue
			}
		}
		s := slots
		if ev.Step.Action == step.Wait {
			s = waits
		}
		select {
		case s <- struct{}{}:
		case <-ctx.Done():
			q.handBack(ev)
			return nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-s }()
			q.run(ctx, opts, handler, ev)
		}()
	}
}

// run delivers ev until an attempt settles it, reporting each attempt.
func (q *MemoryQueue) run(ctx context.Context, opts WorkerOptions, handler Handler, ev *StepEvent) {
	for attempt := 1; ; attempt++ {
		actx := logging.Attach(ctx, "executor", opts.Kind, "plan", ev.Plan, "revision", ev.Revision,
			"phase", ev.Step.Phase, "step", ev.Step.Key, "attempt", attempt)
		stepCtx, cancel := context.WithTimeout(actx, stepTimeout(opts, ev))
		start := time.Now()
		report, err := handler(stepCtx, ev)
		cancel()
		if ctx.Err() != nil && err != nil {
			q.handBack(ev) // shutting down: another Work takes it
			return
		}
		res := newResult(ev, opts.Kind, attempt, time.Since(start), report)
		judge(res, err, opts.MaxDeliver)
		q.mu.Lock()
		q.results = append(q.results, *res)
		q.mu.Unlock()
		if res.Outcome != Retrying {
			return
		}
		select {
		case <-ctx.Done():
			q.handBack(ev)
			return
		case <-time.After(opts.backOff(attempt)):
		}
	}
}

// handBack queues ev again, first, for the next Work of its kind.
func (q *MemoryQueue) handBack(ev *StepEvent) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.push(ev, true)
}

// WatchLost returns when ctx ends: in one process, a delivery dies only
// with the process, and the queue with it.
func (q *MemoryQueue) WatchLost(ctx context.Context) error {
	<-ctx.Done()
	return nil
}
