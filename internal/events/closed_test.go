package events_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ferry-dev/ferry/internal/events"
)

// TestEmbeddedBusRefusesOthers: the bus that `reconciler run` embeds by
// default takes no client but its own. Nothing listens at the server's
// client URL, so another process, a local user's, cannot connect there
// and publish a step for an executor to run; the step it tried is not in
// the work queue, while the bus's own connection works.
func TestEmbeddedBusRefusesOthers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := connect(t, ctx, events.BusOptions{DataDir: t.TempDir()})
	if addr := b.Server.Addr(); addr != nil {
		t.Errorf("the embedded server listens on %s; want no listener", addr)
	}
	ev := stepEvent("p1", "forged")
	if nc, err := nats.Connect(b.Server.ClientURL(), nats.Timeout(time.Second)); err == nil {
		defer nc.Close()
		t.Errorf("a client of another process connected to the embedded server at %s", b.Server.ClientURL())
		if js, err := jetstream.New(nc); err == nil {
			_, _ = (&events.Publisher{JS: js}).PublishStep(ctx, ev)
		}
	}
	// Nor does it listen on NATS's well-known port.
	if c, err := net.DialTimeout("tcp", "127.0.0.1:4222", time.Second); err == nil {
		c.Close()
		t.Log("something listens on 127.0.0.1:4222; it is not this server unless the error above says so")
	}
	s, err := b.JS.Stream(ctx, events.StreamSteps)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Msgs; n != 0 {
		t.Errorf("the work queue holds %d steps published by another client; want 0", n)
	}
	// The bus's own, in-process connection publishes.
	if _, err := (&events.Publisher{JS: b.JS}).PublishStep(ctx, stepEvent("p1", "own")); err != nil {
		t.Errorf("the bus's own connection: %v", err)
	}
}

// TestConnectCredentials: a user goes with its password file, a
// credentials file with neither, and a bad combination or file fails
// Connect with ErrCredentials before it reaches any server.
func TestConnectCredentials(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for name, opts := range map[string]events.BusOptions{
		"user without password": {User: "u"},
		"password without user": {PasswordFile: dir + "/p"},
		"user and creds":        {User: "u", PasswordFile: dir + "/p", CredsFile: dir + "/c"},
		"missing password file": {User: "u", PasswordFile: dir + "/none"},
	} {
		opts.DataDir = t.TempDir()
		if _, err := events.Connect(ctx, opts); !errors.Is(err, events.ErrCredentials) {
			t.Errorf("%s: %v; want ErrCredentials", name, err)
		}
	}
}
