package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// PullExpiry bounds each pull request of the results and step consumers.
// The server keeps a pull request until it expires or is filled, also
// when the process that made it was killed: messages delivered to it are
// lost until their AckWait ends. Five seconds (JetStream's default is 30)
// bounds how long a killed reconciler or executor replica holds messages
// back; an idle consumer asks again every five seconds.
const PullExpiry = 5 * time.Second

// ResultsAckWait is how long a result delivered to the reconciler may go
// unacked before JetStream delivers it again. Taking a result is quick, so
// it is short: a reconciler killed with a pull request pending leaves that
// request on the server, results delivered to it are lost until AckWait
// ends, and the reconciler that replaces it waits that long for them
// (30s at JetStream's default, in `make chaos`).
const ResultsAckWait = 5 * time.Second

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
		AckWait:       ResultsAckWait,
	})
	if err != nil {
		return fmt.Errorf("create results consumer %s: %w", durable, err)
	}
	iter, err := cons.Messages(jetstream.PullExpiry(PullExpiry))
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
				return nil //nolint:nilerr // a stop, not a failure: ctx is done or the iterator closed
			}
			if missedHeartbeat(err) {
				continue
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

// ReplayResults delivers to fn, in order, the results published on
// FERRY_RESULTS since since and up to the last one there now, through an
// ordered consumer that acks nothing and leaves the durable one alone.
//
// A reconciler that starts (or becomes leader) replays the last
// DuplicateWindow of results before it publishes: a result that its
// predecessor took and acked but had not acted on when it was killed is
// not delivered again by the durable consumer, and the step, published
// again, is dropped as a duplicate for as long as that window lasts, so
// without the replay nothing would ever end it. Errors of fn are ignored:
// the durable consumer delivers what comes after.
func ReplayResults(ctx context.Context, js jetstream.JetStream, since time.Time, fn func(context.Context, *ResultEvent) error) (int, error) {
	var info *jetstream.StreamInfo
	err := untilAnswered(ctx, func(ctx context.Context) error {
		stream, err := js.Stream(ctx, StreamResults)
		if err == nil {
			info = stream.CachedInfo() // the stream's information, just asked for
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("replay results: %w", err)
	}
	last := info.State.LastSeq
	if last == 0 || info.State.LastTime.Before(since) {
		return 0, nil
	}
	var cons jetstream.Consumer
	err = untilAnswered(ctx, func(ctx context.Context) (err error) {
		cons, err = js.OrderedConsumer(ctx, StreamResults, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{ResultsPrefix + ">"},
			DeliverPolicy:  jetstream.DeliverByStartTimePolicy,
			OptStartTime:   &since,
		})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("replay results: %w", err)
	}
	n := 0
	for {
		batch, err := cons.Fetch(256, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return n, fmt.Errorf("replay results: %w", err)
		}
		got := false
		for msg := range batch.Messages() {
			got = true
			meta, err := msg.Metadata()
			if err != nil {
				return n, fmt.Errorf("replay results: %w", err)
			}
			var ev ResultEvent
			if json.Unmarshal(msg.Data(), &ev) == nil && ev.Type == TypeResult {
				_ = fn(ctx, &ev)
				n++
			}
			if meta.Sequence.Stream >= last {
				return n, nil
			}
		}
		if !got {
			// Nothing up to last (the rest was removed by MaxAge, or
			// the fetch failed): the durable consumer goes on.
			if err := ctx.Err(); err != nil {
				return n, err
			}
			return n, batch.Error()
		}
	}
}
