package events_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/step"
)

// TestExhaustedStepIsReported: a step whose every delivery dies without a
// word is reported Failed once JetStream gives up on it.
func TestExhaustedStepIsReported(t *testing.T) {
	n := bus(t)
	res := collect(t, n.JetStream)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = events.WatchMaxDeliveries(logging.With(ctx, quiet), n.Conn, n.JetStream) }()
	cons, err := n.JetStream.CreateOrUpdateConsumer(ctx, events.StreamSteps, jetstream.ConsumerConfig{
		Durable: events.ConsumerName("test"), FilterSubject: events.StepsPrefix + "test.>",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 200 * time.Millisecond, MaxDeliver: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	ev := stepEvent("p1", "a")
	publish(t, n.JetStream, ev)
	// Two deliveries, neither settled; a third pull, as a live executor
	// always has one waiting, makes the server notice it has given up.
	for range 3 {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for range batch.Messages() {
		}
	}
	all := res.wait(t, "the exhausted step's failure", func(all []events.ResultEvent) bool { return len(all) == 1 })
	if r := all[0]; r.Outcome != events.Failed || r.StepID != ev.ID || r.Attempt != 2 {
		t.Errorf("result = %+v", r)
	}
	waitEmpty(t, n.JetStream)
}

// TestWaitsDoNotHoldSteps: with one slot, a step behind a wait that
// has not ended yet still runs: waits have slots of their own.
func TestWaitsDoNotHoldSteps(t *testing.T) {
	n := bus(t)
	res := collect(t, n.JetStream)
	release := make(chan struct{})
	startWorker(t, n.JetStream, events.WorkerOptions{Kind: "test", Concurrency: 1, Waits: 2},
		func(ctx context.Context, ev *events.StepEvent) (events.Report, error) {
			if ev.Step.Action == step.Wait {
				select {
				case <-release:
				case <-ctx.Done():
					return events.Report{}, ctx.Err()
				}
			}
			return events.Report{Message: string(ev.Step.Action)}, nil
		})
	wait := stepEvent("p1", "waiting")
	wait.Step.Action = step.Wait
	publish(t, n.JetStream, wait)
	publish(t, n.JetStream, stepEvent("p2", "other"))
	res.wait(t, "the step behind the wait", func(all []events.ResultEvent) bool {
		return len(all) == 1 && all[0].Plan == "p2" && all[0].Outcome == events.Succeeded
	})
	close(release)
	res.wait(t, "the wait", func(all []events.ResultEvent) bool { return len(all) == 2 && all[1].Plan == "p1" })
}
