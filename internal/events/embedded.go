package events

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedOptions configures the NATS server that ferry runs in its own
// process when no external NATS URL is given.
//
// By default the server opens no port at all: ferry's own client reaches
// it in process (nats.InProcessServer), and nothing else can. A client on
// a TCP port could publish a step, which an executor runs, or a forged
// result, so a listener is opened only when asked for (Listen), and then
// only for clients that present Token.
type EmbeddedOptions struct {
	// StoreDir is the directory of JetStream's file store. It is required:
	// published steps must survive a restart of the process.
	StoreDir string
	// Listen opens a TCP listener on Host:Port, for clients in other
	// processes. Without it the server listens on nothing.
	Listen bool
	// Host is the address to listen on with Listen. Default 127.0.0.1, so
	// that the server is not reachable from other machines.
	Host string
	// Port is the client port with Listen. Zero picks a free port; read
	// it back with Server.ClientURL.
	Port int
	// Token is what every client must present (nats.Token, or the user
	// of its URL: nats://TOKEN@host:port); in-process clients too when it
	// is set. Required with Listen: StartEmbedded opens no port that takes
	// a client without it.
	Token string
	// ReadyTimeout bounds the wait for the server to accept connections.
	// Default 10s.
	ReadyTimeout time.Duration
}

// ErrNotReady is returned by StartEmbedded when the server did not accept
// connections within EmbeddedOptions.ReadyTimeout.
var ErrNotReady = errors.New("embedded NATS server not ready")

// ErrNoToken is returned by StartEmbedded when asked to listen on TCP
// without a token: anyone who reaches the port could publish steps.
var ErrNoToken = errors.New("embedded NATS server listens on TCP only with a token")

// StartEmbedded starts a NATS server with JetStream inside the process and
// returns once it accepts connections: in process only (connect with
// nats.InProcessServer), or also on TCP with opts.Listen. The caller stops
// it with Shutdown followed by WaitForShutdown. On error nothing is left
// running.
func StartEmbedded(opts EmbeddedOptions) (*server.Server, error) {
	if opts.StoreDir == "" {
		return nil, errors.New("start embedded NATS: StoreDir is required")
	}
	if opts.Listen && opts.Token == "" {
		return nil, fmt.Errorf("start embedded NATS on %s:%d: %w", opts.Host, opts.Port, ErrNoToken)
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
	where := "in process"
	if opts.Listen {
		where = fmt.Sprintf("on %s:%d", opts.Host, opts.Port)
	}
	ns, err := server.NewServer(&server.Options{
		ServerName:    "ferry",
		Host:          opts.Host,
		Port:          opts.Port,
		DontListen:    !opts.Listen,
		Authorization: opts.Token,
		JetStream:     true,
		StoreDir:      opts.StoreDir,
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
		return nil, fmt.Errorf("start embedded NATS %s: %w after %s", where, ErrNotReady, opts.ReadyTimeout)
	}
	return ns, nil
}
