package testenv_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestNATS proves the embedded server runs JetStream for real: the duplicate
// window drops a re-published message ID, a durable pull consumer receives
// messages in order, an unacknowledged message is redelivered after AckWait,
// and the work-queue stream deletes what was acknowledged.
func TestNATS(t *testing.T) {
	n := testenv.StartNATS(t)
	ctx := t.Context()
	js := n.JetStream
	// Only a client with the token in n.URL gets in.
	if nc, err := nats.Connect(n.Server.ClientURL()); !errors.Is(err, nats.ErrAuthorization) {
		if err == nil {
			nc.Close()
		}
		t.Errorf("connect without the token: %v; want %v", err, nats.ErrAuthorization)
	}

	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:       "SMOKE",
		Subjects:   []string{"smoke.>"},
		Retention:  jetstream.WorkQueuePolicy,
		Storage:    jetstream.FileStorage,
		Duplicates: time.Minute,
	})
	if err != nil {
		t.Fatalf("create stream: %v", err)
	}
	for i, id := range []string{"a", "b", "c"} {
		ack, err := js.Publish(ctx, "smoke.steps.kube", []byte("step "+id), jetstream.WithMsgID(id))
		if err != nil {
			t.Fatalf("publish %s: %v", id, err)
		}
		if ack.Duplicate || ack.Sequence != uint64(i+1) {
			t.Fatalf("publish %s: ack %+v; want sequence %d, not a duplicate", id, ack, i+1)
		}
	}
	ack, err := js.Publish(ctx, "smoke.steps.kube", []byte("step a again"), jetstream.WithMsgID("a"))
	if err != nil {
		t.Fatalf("re-publish a: %v", err)
	}
	if !ack.Duplicate {
		t.Errorf("re-publish with message ID a: ack %+v; want Duplicate", ack)
	}

	const ackWait = 300 * time.Millisecond
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:    "smoke",
		AckPolicy:  jetstream.AckExplicitPolicy,
		AckWait:    ackWait,
		MaxDeliver: 3,
	})
	if err != nil {
		t.Fatalf("create consumer: %v", err)
	}
	batch, err := cons.Fetch(3, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	var got []string
	for msg := range batch.Messages() {
		got = append(got, string(msg.Data()))
		if string(msg.Data()) == "step c" {
			continue // left unacknowledged: must come back
		}
		if err := msg.DoubleAck(ctx); err != nil {
			t.Fatalf("ack %q: %v", msg.Data(), err)
		}
	}
	if err := batch.Error(); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if fmt.Sprint(got) != "[step a step b step c]" {
		t.Fatalf("fetched %q; want the three steps in publication order", got)
	}

	msg, err := cons.Next(jetstream.FetchMaxWait(10 * ackWait))
	if err != nil {
		t.Fatalf("wait for redelivery: %v", err)
	}
	meta, err := msg.Metadata()
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	if string(msg.Data()) != "step c" || meta.NumDelivered != 2 {
		t.Fatalf("redelivered %q on delivery %d; want \"step c\" on delivery 2", msg.Data(), meta.NumDelivered)
	}
	if err := msg.DoubleAck(ctx); err != nil {
		t.Fatalf("ack redelivered message: %v", err)
	}

	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	if info.State.Msgs != 0 {
		t.Errorf("stream holds %d messages after all were acknowledged; want 0 (work queue)", info.State.Msgs)
	}
}
