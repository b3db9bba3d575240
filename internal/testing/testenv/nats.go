package testenv

import (
	"net"

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

	// storeDir is JetStream's file store, kept so that Restart can start
	// the new server on the same streams.
	storeDir string
}

// StartNATS starts the same embedded server that ferry runs by default, on a
// random port with its file store in a temporary directory.
func StartNATS(t T) *NATS {
	t.Helper()
	n := &NATS{storeDir: t.TempDir()}
	ns, err := events.StartEmbedded(events.EmbeddedOptions{StoreDir: n.storeDir})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	n.Server, n.URL = ns, ns.ClientURL()
	// n.Server, not ns: after a Restart the server to stop is the new one.
	t.Cleanup(func() {
		n.Server.Shutdown()
		n.Server.WaitForShutdown()
	})
	n.Conn, err = nats.Connect(n.URL, nats.Name("ferry-testenv"))
	if err != nil {
		t.Fatalf("testenv: connect to NATS at %s: %v", n.URL, err)
	}
	t.Cleanup(n.Conn.Close) // runs before the server's shutdown
	n.JetStream, err = jetstream.New(n.Conn)
	if err != nil {
		t.Fatalf("testenv: JetStream context: %v", err)
	}
	return n
}

// Restart shuts the server down and starts a new one, which replaces
// n.Server, on the same port and file store: n.URL stays valid and every
// stream, message and durable consumer survives. It returns once the new
// server accepts connections; clients of the old one, n.Conn among them,
// reconnect on their own (nats.go retries every 2 seconds by default) and
// buffer what they publish meanwhile. It fails the test if the new server
// does not start, e.g. because the port was taken in between.
func (n *NATS) Restart(t T) {
	t.Helper()
	addr, ok := n.Server.Addr().(*net.TCPAddr)
	if !ok {
		t.Fatalf("testenv: NATS at %s listens on %v, not TCP", n.URL, n.Server.Addr())
	}
	n.Server.Shutdown()
	n.Server.WaitForShutdown()
	ns, err := events.StartEmbedded(events.EmbeddedOptions{
		StoreDir: n.storeDir,
		Host:     addr.IP.String(),
		Port:     addr.Port,
	})
	if err != nil {
		t.Fatalf("testenv: restart NATS at %s: %v", n.URL, err)
	}
	n.Server = ns
}
