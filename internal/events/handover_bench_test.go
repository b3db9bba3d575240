package events_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// BenchmarkDeadExecutorHandover measures, with the workers' default
// options, the time from the death of an executor in the middle of a step
// (its connection closes, nothing is acked or handed back) to another
// replica starting that step; reported as handover-s. Run it with
// -benchtime=3x: each iteration waits out one AckWait.
func BenchmarkDeadExecutorHandover(b *testing.B) {
	ctx, cancel := context.WithCancel(logging.With(context.Background(), quiet))
	defer cancel()
	url := testenv.StartNATS(b).URL
	bb, err := events.Connect(ctx, events.BusOptions{URL: url})
	if err != nil {
		b.Fatal(err)
	}
	defer bb.Close()
	// The replica that lives on, on a connection of its own.
	started := make(chan time.Time, 16)
	live, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer live.Close()
	ljs, _ := jetstream.New(live)
	pub := &events.Publisher{JS: bb.JS}
	var total time.Duration
	for i := 0; i < b.N; i++ {
		// The replica that dies: it takes the next step and is killed
		// while running it.
		dying, err := nats.Connect(url)
		if err != nil {
			b.Fatal(err)
		}
		djs, _ := jetstream.New(dying)
		took := make(chan struct{})
		dctx, dcancel := context.WithCancel(ctx)
		go func() {
			_ = events.RunWorker(dctx, djs, events.WorkerOptions{Kind: "test"}, func(ctx context.Context, _ *events.StepEvent) (events.Report, error) {
				close(took)
				<-ctx.Done()
				return events.Report{}, ctx.Err()
			})
		}()
		if _, err := pub.PublishStep(ctx, stepEvent("handover", time.Now().String())); err != nil {
			b.Fatal(err)
		}
		<-took
		dying.Close() // the death: no ack, no nak, no more in-progress
		died := time.Now()
		lctx, lcancel := context.WithCancel(ctx)
		go func() {
			_ = events.RunWorker(lctx, ljs, events.WorkerOptions{Kind: "test"}, func(context.Context, *events.StepEvent) (events.Report, error) {
				started <- time.Now()
				return events.Report{}, nil
			})
		}()
		at := <-started
		total += at.Sub(died)
		lcancel()
		dcancel()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "handover-s")
}
