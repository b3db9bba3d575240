package events

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedOptions configures the NATS server that ferry runs in its own
// process when no external NATS URL is given.
type EmbeddedOptions struct {
	// StoreDir is the directory of JetStream's file store. It is required:
	// published steps must survive a restart of the process.
	StoreDir string
	// Host is the address to listen on. Default 127.0.0.1, so that the
	// embedded server is not reachable from other machines.
	Host string
	// Port is the client port. Zero picks a free port; read it back with
	// Server.ClientURL.
	Port int
	// ReadyTimeout bounds the wait for the server to accept connections.
	// Default 10s.
	ReadyTimeout time.Duration
}

// ErrNotReady is returned by StartEmbedded when the server did not accept
// connections within EmbeddedOptions.ReadyTimeout.
var ErrNotReady = errors.New("embedded NATS server not ready")

// StartEmbedded starts a NATS server with JetStream inside the process and
// returns once it accepts connections. The caller stops it with Shutdown
// followed by WaitForShutdown. On error nothing is left running.
func StartEmbedded(opts EmbeddedOptions) (*server.Server, error) {
	if opts.StoreDir == "" {
		return nil, errors.New("start embedded NATS: StoreDir is required")
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Port == 0 {
		opts.Port = server.RANDOM_PORT
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 10 * time.Second
	}
	ns, err := server.NewServer(&server.Options{
		ServerName: "ferry",
		Host:       opts.Host,
		Port:       opts.Port,
		JetStream:  true,
		StoreDir:   opts.StoreDir,
		// ferry logs through slog; the server's own logger and its signal
		// handlers would fight the host process for both.
		NoLog:  true,
		NoSigs: true,
	})
	if err != nil {
		return nil, fmt.Errorf("start embedded NATS in %s: %w", opts.StoreDir, err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(opts.ReadyTimeout) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("start embedded NATS on %s:%d: %w after %s", opts.Host, opts.Port, ErrNotReady, opts.ReadyTimeout)
	}
	return ns, nil
}
