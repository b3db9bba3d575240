package testenv_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestNATSRestart proves that a restarted server keeps its URL and its file
// store: a message published before the restart is still in the stream, and
// the connection made before it reconnects and publishes again.
func TestNATSRestart(t *testing.T) {
	n := testenv.StartNATS(t)
	ctx := t.Context()

	if _, err := n.JetStream.CreateStream(ctx, jetstream.StreamConfig{
		Name:     "RESTART",
		Subjects: []string{"restart.>"},
		Storage:  jetstream.FileStorage,
	}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	if _, err := n.JetStream.Publish(ctx, "restart.before", []byte("before")); err != nil {
		t.Fatalf("publish before restart: %v", err)
	}

	old := n.Server
	n.Restart(t)
	if n.Server == old {
		t.Fatal("Restart kept the old server in n.Server")
	}
	if got := n.Server.ClientURL(); !strings.HasSuffix(n.URL, "@"+strings.TrimPrefix(got, "nats://")) {
		t.Fatalf("restarted server listens at %s; want the address of %s", got, n.URL)
	}

	// The old connection needs a reconnect (2 seconds by default) before
	// its buffered publish reaches the server.
	pubCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ack, err := n.JetStream.Publish(pubCtx, "restart.after", []byte("after"))
	if err != nil {
		t.Fatalf("publish after restart on the old connection: %v", err)
	}
	if ack.Sequence != 2 {
		t.Errorf("publish after restart: sequence %d; want 2, after the message published before", ack.Sequence)
	}
	if got := n.Conn.Stats().Reconnects; got < 1 {
		t.Errorf("old connection reconnected %d times; want at least once", got)
	}

	// A fresh connection reads what the store kept.
	nc, err := nats.Connect(n.URL)
	if err != nil {
		t.Fatalf("connect after restart: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("JetStream context: %v", err)
	}
	stream, err := js.Stream(ctx, "RESTART")
	if err != nil {
		t.Fatalf("stream after restart: %v", err)
	}
	for seq, want := range map[uint64]string{1: "before", 2: "after"} {
		msg, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("get message %d after restart: %v", seq, err)
		}
		if string(msg.Data) != want {
			t.Errorf("message %d is %q; want %q", seq, msg.Data, want)
		}
	}
}
