package testenv

import (
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ferry-dev/ferry/internal/events"
)

// NATS is a running embedded NATS server with JetStream and a client
// connected to it over TCP.
type NATS struct {
	Server    *server.Server
	URL       string
	Conn      *nats.Conn
	JetStream jetstream.JetStream
}

// StartNATS starts the same embedded server that ferry runs by default, on a
// random port with its file store in a temporary directory.
func StartNATS(t T) *NATS {
	t.Helper()
	ns, err := events.StartEmbedded(events.EmbeddedOptions{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	nc, err := nats.Connect(ns.ClientURL(), nats.Name("ferry-testenv"))
	if err != nil {
		t.Fatalf("testenv: connect to NATS at %s: %v", ns.ClientURL(), err)
	}
	t.Cleanup(nc.Close) // runs before the server's shutdown
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("testenv: JetStream context: %v", err)
	}
	return &NATS{Server: ns, URL: ns.ClientURL(), Conn: nc, JetStream: js}
}
