package events

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// maxDeliveriesSubject is where JetStream announces that a consumer gave up
// redelivering a message.
const maxDeliveriesSubject = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + StreamSteps + ".*"

// WatchMaxDeliveries reports steps that JetStream stopped redelivering
// because no executor ever settled them (each delivery crashed or hung):
// it publishes a Failed result for each and removes the step from the work
// queue, so that no step is lost silently. Several replicas may watch; the
// result's message ID makes the report count once. It returns when ctx ends.
func WatchMaxDeliveries(ctx context.Context, nc *nats.Conn, js jetstream.JetStream) error {
	log := logging.From(ctx)
	var stream jetstream.Stream
	err := untilAnswered(ctx, func(ctx context.Context) (err error) {
		stream, err = js.Stream(ctx, StreamSteps)
		return err
	})
	if err != nil {
		return fmt.Errorf("watch max deliveries: %w", err)
	}
	pub := &Publisher{JS: js}
	ch := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(maxDeliveriesSubject, ch)
	if err != nil {
		return fmt.Errorf("subscribe to %s: %w", maxDeliveriesSubject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-ch:
			var adv struct {
				StreamSeq  uint64 `json:"stream_seq"`
				Consumer   string `json:"consumer"`
				Deliveries int    `json:"deliveries"`
			}
			if err := json.Unmarshal(m.Data, &adv); err != nil {
				log.Error("unreadable max-deliveries advisory", "error", err)
				continue
			}
			if err := reportExhausted(ctx, stream, pub, adv.StreamSeq, adv.Deliveries, adv.Consumer); err != nil {
				log.Error("could not report an exhausted step", "stream_seq", adv.StreamSeq, "error", err)
			}
		}
	}
}

func reportExhausted(ctx context.Context, stream jetstream.Stream, pub *Publisher, seq uint64, deliveries int, consumer string) error {
	raw, err := stream.GetMsg(ctx, seq)
	if err != nil {
		return fmt.Errorf("get step %d: %w", seq, err)
	}
	var ev StepEvent
	if err := json.Unmarshal(raw.Data, &ev); err != nil {
		return fmt.Errorf("decode step %d: %w", seq, err)
	}
	res := &ResultEvent{
		Type: TypeResult, StepID: ev.ID, Plan: ev.Plan, Revision: ev.Revision, Phase: ev.Step.Phase,
		StepKey: ev.Step.Key, Action: ev.Step.Action, Target: ev.Step.Target.String(), Executor: ev.Step.Executor, Outcome: Failed, Attempt: deliveries,
		Error: fmt.Sprintf("delivered %d times to %s and never settled: the executor crashed or hung each time", deliveries, consumer),
		At:    time.Now().UTC(),
	}
	if err := pub.PublishResult(ctx, res); err != nil {
		return err
	}
	if err := stream.DeleteMsg(ctx, seq); err != nil {
		return fmt.Errorf("remove exhausted step %d: %w", seq, err)
	}
	return nil
}
