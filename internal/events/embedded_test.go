package events

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

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
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatalf("connect to %s: %v", ns.ClientURL(), err)
	}
	nc.Close()

	// A second server on the same port cannot listen: it must give up with
	// ErrNotReady instead of hanging or exiting the process.
	taken := ns.Addr().(*net.TCPAddr).Port
	_, err = StartEmbedded(EmbeddedOptions{StoreDir: t.TempDir(), Port: taken, ReadyTimeout: 500 * time.Millisecond})
	if !errors.Is(err, ErrNotReady) {
		t.Errorf("second server on a taken port: %v; want ErrNotReady", err)
	}
}
