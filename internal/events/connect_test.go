package events_test

import (
	"context"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestConnect: the embedded default and an external server by URL end up
// on the same code path: streams in place, a step goes round.
func TestConnect(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	embedded, err := events.Connect(ctx, events.BusOptions{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer embedded.Close()
	if embedded.Server == nil {
		t.Fatal("no embedded server without a URL")
	}
	// An "external" cluster: a server this bus reaches by URL over TCP.
	external, err := events.Connect(ctx, events.BusOptions{URL: testenv.StartNATS(t).URL, Name: "ferry-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer external.Close()
	if external.Server != nil {
		t.Error("an external URL started a server")
	}
	for name, b := range map[string]*events.Bus{"embedded": embedded, "external": external} {
		if _, err := b.JS.Stream(ctx, events.StreamResults); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := events.Connect(ctx, events.BusOptions{}); err == nil {
		t.Error("Connect with neither URL nor data directory succeeded")
	}
	if _, err := events.Connect(ctx, events.BusOptions{URL: "nats://127.0.0.1:1"}); err == nil {
		t.Error("Connect to a closed port succeeded")
	}
	if _, err := events.Connect(ctx, events.BusOptions{DataDir: t.TempDir(), Role: "admin"}); err == nil {
		t.Error("Connect as an unknown role succeeded")
	}
}
