package events

import (
	"errors"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestStartEmbedded: by default the server listens on no port (a client
// reaches it in process only); asked to listen, it wants a token, and a
// client without it is refused; a taken port gives up with ErrNotReady.
func TestStartEmbedded(t *testing.T) {
	if _, err := StartEmbedded(EmbeddedOptions{}); err == nil {
		t.Error("StartEmbedded without StoreDir succeeded; want an error")
	}

	ns, err := StartEmbedded(EmbeddedOptions{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.JetStreamEnabled() {
		t.Error("JetStream is not enabled")
	}
	if addr := ns.Addr(); addr != nil {
		t.Errorf("the default server listens on %s; want no listener", addr)
	}
	if nc, err := nats.Connect(ns.ClientURL(), nats.Timeout(time.Second)); err == nil {
		nc.Close()
		t.Errorf("a TCP client reached the default server at %s", ns.ClientURL())
	}
	nc, err := nats.Connect(ns.ClientURL(), nats.InProcessServer(ns))
	if err != nil {
		t.Fatalf("connect in process: %v", err)
	}
	nc.Close()

	if _, err := StartEmbedded(EmbeddedOptions{StoreDir: t.TempDir(), Listen: true}); !errors.Is(err, ErrNoToken) {
		t.Errorf("listen without a token: %v; want ErrNoToken", err)
	}
	listening, err := StartEmbedded(EmbeddedOptions{StoreDir: t.TempDir(), Listen: true, Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { listening.Shutdown(); listening.WaitForShutdown() })
	if nc, err := nats.Connect(listening.ClientURL(), nats.Timeout(time.Second)); !errors.Is(err, nats.ErrAuthorization) {
		if err == nil {
			nc.Close()
		}
		t.Errorf("connect without the token: %v; want %v", err, nats.ErrAuthorization)
	}
	u, _ := url.Parse(listening.ClientURL())
	u.User = url.User("s3cret")
	nc, err = nats.Connect(u.String())
	if err != nil {
		t.Fatalf("connect with the token: %v", err)
	}
	nc.Close()

	// A second server on the same port cannot listen: it must give up with
	// ErrNotReady instead of hanging or exiting the process.
	taken := listening.Addr().(*net.TCPAddr).Port
	_, err = StartEmbedded(EmbeddedOptions{StoreDir: t.TempDir(), Listen: true, Token: "s3cret", Port: taken, ReadyTimeout: 500 * time.Millisecond})
	if !errors.Is(err, ErrNotReady) {
		t.Errorf("second server on a taken port: %v; want ErrNotReady", err)
	}
}
