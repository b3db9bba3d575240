package events

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of the streams.
const (
	// DuplicateWindow is how long JetStream remembers a step's ID: a step
	// published again within it is dropped.
	DuplicateWindow = 10 * time.Minute
	// ResultsMaxAge is how long results are kept for audit.
	ResultsMaxAge = 30 * 24 * time.Hour
)

// EnsureStreams creates the FERRY_STEPS and FERRY_RESULTS streams, or
// updates them to this configuration. It is idempotent and safe to run from
// every replica at start-up.
func EnsureStreams(ctx context.Context, js jetstream.JetStream) error {
	for _, cfg := range []jetstream.StreamConfig{
		{
			Name:        StreamSteps,
			Description: "ferry: runnable steps, one durable consumer per executor kind",
			Subjects:    []string{StepsPrefix + ">"},
			// Work queue: a step is removed once an executor acked it.
			Retention:  jetstream.WorkQueuePolicy,
			Storage:    jetstream.FileStorage,
			Duplicates: DuplicateWindow,
		},
		{
			Name:        StreamResults,
			Description: "ferry: step results and progress, kept for audit",
			Subjects:    []string{ResultsPrefix + ">"},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			MaxAge:      ResultsMaxAge,
			Duplicates:  DuplicateWindow,
		},
	} {
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("create or update stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}
