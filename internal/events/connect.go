package events

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ferry-dev/ferry/internal/logging"
)

// BusOptions say where the bus is. An empty URL runs the embedded server.
type BusOptions struct {
	// URL of an external NATS cluster (nats://host:4222,...). Empty runs
	// an embedded nats-server with its JetStream store under DataDir.
	URL string
	// DataDir holds the embedded server's store (DataDir/jetstream).
	DataDir string
	// CredsFile is a NATS credentials file for the external cluster.
	CredsFile string
	// TLSCA, TLSCert and TLSKey configure TLS to the external cluster:
	// the CA bundle to verify it, and a client certificate and key.
	TLSCA, TLSCert, TLSKey string
	// Name is the connection's name, shown by the server's monitoring.
	Name string
	// Replicas is how many copies of each stream the servers keep
	// (--nats-replicas): AutoReplicas (zero) chooses 3 on a cluster of at
	// least three JetStream servers and 1 otherwise, the embedded server
	// among them (EnsureStreamsReplicas). More than the servers can hold
	// fails Connect with ErrReplicas.
	Replicas int
}

// Bus is a connection to JetStream with ferry's streams in place.
type Bus struct {
	Conn *nats.Conn
	JS   jetstream.JetStream
	// Server is the embedded server, nil with an external cluster.
	Server *server.Server
	// Replication is how many replicas the streams have, and why.
	Replication Replication
}

// Connect reaches the bus (starting the embedded server when no URL is
// given) and ensures the streams with opts.Replicas, logging how many
// replicas they have and why. Everything after it is the same code path
// for both. Replicas the servers cannot hold fail it with ErrReplicas.
func Connect(ctx context.Context, opts BusOptions) (*Bus, error) {
	b := &Bus{}
	name := opts.Name
	if name == "" {
		name = "ferry"
	}
	copts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1)}
	url := opts.URL
	if url == "" {
		if opts.DataDir == "" {
			return nil, errors.New("connect to NATS: neither a URL nor a data directory for the embedded server")
		}
		ns, err := StartEmbedded(EmbeddedOptions{StoreDir: filepath.Join(opts.DataDir, "jetstream")})
		if err != nil {
			return nil, err
		}
		b.Server = ns
		url = ns.ClientURL()
		copts = append(copts, nats.InProcessServer(ns))
	}
	if opts.CredsFile != "" {
		copts = append(copts, nats.UserCredentials(opts.CredsFile))
	}
	if opts.TLSCA != "" {
		copts = append(copts, nats.RootCAs(opts.TLSCA))
	}
	if opts.TLSCert != "" || opts.TLSKey != "" {
		copts = append(copts, nats.ClientCert(opts.TLSCert, opts.TLSKey))
	}
	nc, err := nats.Connect(url, copts...)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	b.Conn = nc
	if b.JS, err = jetstream.New(nc); err != nil {
		b.Close()
		return nil, fmt.Errorf("JetStream at %s: %w", url, err)
	}
	if b.Replication, err = EnsureStreamsReplicas(ctx, b.JS, opts.Replicas); err != nil {
		b.Close()
		return nil, err
	}
	logging.From(ctx).Info("event streams in place", "streams", []string{StreamSteps, StreamResults},
		"replicas", b.Replication.Replicas, "why", b.Replication.Reason)
	return b, nil
}

// Close drains the connection and stops the embedded server, if any.
func (b *Bus) Close() {
	if b.Conn != nil {
		// Drain lets in-flight publishes and acks finish; wait for it,
		// briefly, before the embedded server goes away under it.
		if err := b.Conn.Drain(); err == nil {
			deadline := time.Now().Add(5 * time.Second)
			for !b.Conn.IsClosed() && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
		}
		b.Conn.Close()
	}
	if b.Server != nil {
		b.Server.Shutdown()
		b.Server.WaitForShutdown()
	}
}
