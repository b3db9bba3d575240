package events_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/logging"
)

// BenchmarkStepRoundTrip measures a no-op step from publication to its
// result arriving at a results consumer, on the embedded server, one step
// at a time. It reports the median and 99th percentile as p50-ms and p99-ms.
func BenchmarkStepRoundTrip(b *testing.B) {
	b.StopTimer()
	ctx, cancel := context.WithCancel(logging.With(context.Background(), quiet))
	defer cancel()
	bb, err := events.Connect(ctx, events.BusOptions{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer bb.Close()
	go func() {
		_ = events.RunWorker(ctx, bb.JS, events.WorkerOptions{Kind: "test", Concurrency: 1},
			func(context.Context, *events.StepEvent) (events.Report, error) { return events.Report{}, nil })
	}()
	got := make(chan struct{}, 1)
	go func() {
		_ = events.RunResults(ctx, bb.JS, "bench", func(context.Context, *events.ResultEvent) error {
			got <- struct{}{}
			return nil
		})
	}()
	pub := &events.Publisher{JS: bb.JS}
	lat := make([]time.Duration, 0, b.N)
	b.StartTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := pub.PublishStep(ctx, stepEvent("bench", fmt.Sprint(i))); err != nil {
			b.Fatal(err)
		}
		<-got
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
