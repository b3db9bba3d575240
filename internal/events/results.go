package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// RunResults delivers every result on FERRY_RESULTS to fn through the
// durable consumer named durable, from the oldest not yet acked, until ctx
// ends. A result fn returns an error for is redelivered; one that is not a
// result event is skipped.
func RunResults(ctx context.Context, js jetstream.JetStream, durable string, fn func(context.Context, *ResultEvent) error) error {
	cons, err := js.CreateOrUpdateConsumer(ctx, StreamResults, jetstream.ConsumerConfig{
		Durable:       durable,
		FilterSubject: ResultsPrefix + ">",
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("create results consumer %s: %w", durable, err)
	}
	iter, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("consume results: %w", err)
	}
	go func() {
		<-ctx.Done()
		iter.Stop()
	}()
	for {
		msg, err := iter.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return fmt.Errorf("consume results: %w", err)
		}
		var ev ResultEvent
		if err := json.Unmarshal(msg.Data(), &ev); err != nil || ev.Type != TypeResult {
			_ = msg.Term()
			continue
		}
		if err := fn(ctx, &ev); err != nil {
			_ = msg.Nak()
			continue
		}
		_ = msg.Ack()
	}
}
