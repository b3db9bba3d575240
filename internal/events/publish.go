package events

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
)

// Publisher publishes steps and results.
type Publisher struct {
	JS jetstream.JetStream
}

// PublishStep publishes a step to its executor kind's subject with the
// step's ID as Nats-Msg-Id. duplicate is true when JetStream already had
// the step within its duplicate window and dropped this copy. A publish
// that JetStream does not answer (its stream is electing a leader) is
// tried again until ctx ends.
func (p *Publisher) PublishStep(ctx context.Context, ev *StepEvent) (duplicate bool, err error) {
	data, err := json.Marshal(ev)
	if err != nil {
		return false, fmt.Errorf("encode step %s: %w", ev.Step.Key, err)
	}
	ack, err := publish(ctx, p.JS, StepSubject(ev.Step.Executor, ev.Plan), data, ev.ID)
	if err != nil {
		return false, fmt.Errorf("publish step %s of plan %s: %w", ev.Step.Key, ev.Plan, err)
	}
	return ack.Duplicate, nil
}

// PublishResult publishes a result. Its message ID is the step's ID, the
// attempt and the outcome, so that reporting the same attempt twice (two
// replicas noticing one exhausted step) records it once. It is tried
// again as PublishStep is.
func (p *Publisher) PublishResult(ctx context.Context, ev *ResultEvent) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode result of step %s: %w", ev.StepKey, err)
	}
	id := ev.StepID + "-" + strconv.Itoa(ev.Attempt) + "-" + string(ev.Outcome)
	if _, err := publish(ctx, p.JS, ResultSubject(ev.Plan), data, id); err != nil {
		return fmt.Errorf("publish result of step %s of plan %s: %w", ev.StepKey, ev.Plan, err)
	}
	return nil
}

// publish publishes data on subject with the message ID id, trying again
// while JetStream does not answer, until ctx ends. Trying again is safe:
// the ID makes JetStream drop a copy it already has.
func publish(ctx context.Context, js jetstream.JetStream, subject string, data []byte, id string) (*jetstream.PubAck, error) {
	var ack *jetstream.PubAck
	err := untilAnswered(ctx, func(ctx context.Context) error {
		var err error
		ack, err = js.Publish(ctx, subject, data, jetstream.WithMsgID(id))
		return err
	})
	return ack, err
}
