package testenv

import (
	"net"
	"net/url"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ferry-dev/ferry/internal/events"
)

// NATS is a running embedded NATS server with JetStream and a client
// connected to it over TCP.
type NATS struct {
	Server *server.Server
	// URL is the server's client URL with its token as the user,
	// nats://TOKEN@127.0.0.1:PORT: what ferry's --nats-url and nats.Connect
	// take. A client without the token is refused.
	URL       string
	Conn      *nats.Conn
	JetStream jetstream.JetStream

	// storeDir is JetStream's file store, kept so that Restart can start
	// the new server on the same streams; token is the clients' token.
	storeDir, token string
}

// StartNATS starts the same embedded server that ferry runs by default,
// listening on a random port of 127.0.0.1 for the tests' clients and
// processes, with a random token that each must present (in URL), and its
// file store in a temporary directory.
func StartNATS(t T) *NATS {
	t.Helper()
	n := &NATS{storeDir: t.TempDir(), token: randomHex(16)}
	ns, err := events.StartEmbedded(events.EmbeddedOptions{StoreDir: n.storeDir, Listen: true, Token: n.token})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	n.Server, n.URL = ns, withUser(ns.ClientURL(), url.User(n.token))
	// n.Server, not ns: after a Restart the server to stop is the new one.
	t.Cleanup(func() {
		n.Server.Shutdown()
		n.Server.WaitForShutdown()
	})
	n.Conn, err = nats.Connect(n.URL, nats.Name("ferry-testenv"))
	if err != nil {
		t.Fatalf("testenv: connect to NATS at %s: %v", ns.ClientURL(), err)
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
		t.Fatalf("testenv: NATS at %s listens on %v, not TCP", n.Server.ClientURL(), n.Server.Addr())
	}
	n.Server.Shutdown()
	n.Server.WaitForShutdown()
	ns, err := events.StartEmbedded(events.EmbeddedOptions{
		StoreDir: n.storeDir,
		Listen:   true,
		Host:     addr.IP.String(),
		Port:     addr.Port,
		Token:    n.token,
	})
	if err != nil {
		t.Fatalf("testenv: restart NATS on %s: %v", addr, err)
	}
	n.Server = ns
}

// withUser is a client URL with user information: a token, or a user and
// password.
func withUser(clientURL string, user *url.Userinfo) string {
	u, err := url.Parse(clientURL)
	if err != nil {
		return clientURL // the server's own URL: it parses
	}
	u.User = user
	return u.String()
}
