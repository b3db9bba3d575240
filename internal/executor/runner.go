package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ferry-dev/ferry/internal/events"
)

// RunOptions configure Run; zero values take the events.WorkerOptions
// defaults.
type RunOptions struct {
	// Concurrency is how many steps of each kind run at once, and Waits
	// how many wait steps besides them (events.WorkerOptions).
	Concurrency, Waits int
	// AckWait, MaxDeliver and BackOff are passed to each kind's worker.
	AckWait    time.Duration
	MaxDeliver int
	BackOff    time.Duration
}

// Run takes the steps of each executor's kind from the queue and carries
// them out, until ctx ends; on JetStream (events.JetStreamQueue), replicas
// running the same kinds share the work through the kinds' durable
// consumers. It also reports the steps whose deliveries all died
// (events.Queue's WatchLost). It returns the first worker's error, after
// stopping the others.
func Run(ctx context.Context, q events.Queue, executors []Executor, opts RunOptions) error {
	if len(executors) == 0 {
		return errors.New("run executors: none given")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(executors)+1)
	start := func(name string, fn func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(); err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
				cancel()
			}
		}()
	}
	for _, e := range executors {
		e := e
		start("executor "+string(e.Kind()), func() error {
			return q.Work(ctx, events.WorkerOptions{
				Kind: e.Kind(), Concurrency: opts.Concurrency, Waits: opts.Waits, AckWait: opts.AckWait, MaxDeliver: opts.MaxDeliver,
				BackOff: opts.BackOff,
			}, e.Execute)
		})
	}
	start("max-deliveries watch", func() error { return q.WatchLost(ctx) })
	wg.Wait()
	close(errs)
	return <-errs
}
