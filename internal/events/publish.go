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
// the step within its duplicate window and dropped this copy.
func (p *Publisher) PublishStep(ctx context.Context, ev *StepEvent) (duplicate bool, err error) {
	data, err := json.Marshal(ev)
	if err != nil {
		return false, fmt.Errorf("encode step %s: %w", ev.Step.Key, err)
	}
	ack, err := p.JS.Publish(ctx, StepSubject(ev.Step.Executor, ev.Plan), data, jetstream.WithMsgID(ev.ID))
	if err != nil {
		return false, fmt.Errorf("publish step %s of plan %s: %w", ev.Step.Key, ev.Plan, err)
	}
	return ack.Duplicate, nil
}

// PublishResult publishes a result. Its message ID is the step's ID, the
// attempt and the outcome, so that reporting the same attempt twice (two
// replicas noticing one exhausted step) records it once.
func (p *Publisher) PublishResult(ctx context.Context, ev *ResultEvent) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode result of step %s: %w", ev.StepKey, err)
	}
	id := ev.StepID + "-" + strconv.Itoa(ev.Attempt) + "-" + string(ev.Outcome)
	if _, err := p.JS.Publish(ctx, ResultSubject(ev.Plan), data, jetstream.WithMsgID(id)); err != nil {
		return fmt.Errorf("publish result of step %s of plan %s: %w", ev.StepKey, ev.Plan, err)
	}
	return nil
}
