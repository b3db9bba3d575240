package events

import (
	"context"
	"errors"
	"fmt"
	"io"
	neturl "net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	// CredsFile is a NATS credentials file for the external cluster (a
	// user's JWT and key, as NATS's operator mode issues them).
	CredsFile string
	// User and PasswordFile are a user of the external cluster and the
	// file holding its password, as the servers' own accounts configure
	// them (the NATS Helm chart's config.merge.accounts). Each role has a
	// user of its own (RolePermissions says what it may do), so that an
	// executor's password publishes no step and a reconciler's no result.
	User, PasswordFile string
	// TLSCA, TLSCert and TLSKey configure TLS to the external cluster:
	// the CA bundle to verify it, and a client certificate and key.
	TLSCA, TLSCert, TLSKey string
	// Name is the connection's name, shown by the server's monitoring.
	Name string
	// Replicas is how many copies of each stream the servers keep
	// (--nats-replicas): AutoReplicas (zero) chooses 3 on a cluster of at
	// least three JetStream servers and 1 otherwise, the embedded server
	// among them (EnsureStreamsReplicas). More than the servers can hold
	// fails Connect with ErrReplicas. An executor sets no replicas: with
	// Replicas, it waits until the reconciler has scaled the streams to at
	// least that many.
	Replicas int
	// Role is what the process does on the bus; the zero value is
	// RoleReconciler, which a process running the executors in process
	// takes too. It chooses the connection's inbox prefix (InboxPrefix),
	// and whether Connect creates or updates the streams (the reconciler)
	// or waits for them to exist (an executor, whose user may not create
	// them: RolePermissions).
	Role Role
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

// ErrCredentials is returned (wrapped) by Connect when the credentials
// options do not go together or cannot be read: a user without its
// password file or the other way round, or both a user and a credentials
// file.
var ErrCredentials = errors.New("NATS credentials")

// maxPasswordFile bounds what Connect reads of BusOptions.PasswordFile: a
// password is short, and the file is an input like any other.
const maxPasswordFile = 4 << 10

// Connect reaches the bus (starting the embedded server when no URL is
// given) and, as the reconciler, ensures the streams with opts.Replicas,
// logging how many replicas they have and why. Everything after it is the
// same code path for both. Replicas the servers cannot hold fail it with
// ErrReplicas.
//
// As an executor (opts.Role), it changes no stream: it waits, logging why,
// until the reconciler has created both (with at least opts.Replicas
// copies, when set), and fails when ctx ends first.
//
// The embedded server listens on no port: this connection reaches it in
// process, and no other process can (EmbeddedOptions). An external
// cluster is reached with opts' credentials and TLS.
func Connect(ctx context.Context, opts BusOptions) (*Bus, error) {
	role := opts.Role
	if role == "" {
		role = RoleReconciler
	}
	if !slices.Contains(Roles, role) {
		return nil, fmt.Errorf("connect to NATS: unknown role %q", role)
	}
	b := &Bus{}
	name := opts.Name
	if name == "" {
		name = "ferry"
	}
	copts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.CustomInboxPrefix(InboxPrefix(role))}
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
	auth, err := opts.auth()
	if err != nil {
		b.Close()
		return nil, err
	}
	copts = append(copts, auth...)
	if opts.TLSCA != "" {
		copts = append(copts, nats.RootCAs(opts.TLSCA))
	}
	if opts.TLSCert != "" || opts.TLSKey != "" {
		copts = append(copts, nats.ClientCert(opts.TLSCert, opts.TLSKey))
	}
	where := RedactURL(url)
	nc, err := nats.Connect(url, copts...)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("connect to NATS at %s: %w", where, err)
	}
	b.Conn = nc
	if b.JS, err = jetstream.New(nc); err != nil {
		b.Close()
		return nil, fmt.Errorf("JetStream at %s: %w", where, err)
	}
	if role == RoleExecutor {
		b.Replication, err = awaitStreams(ctx, b.JS, opts.Replicas)
	} else {
		b.Replication, err = EnsureStreamsReplicas(ctx, b.JS, opts.Replicas)
	}
	if err != nil {
		b.Close()
		return nil, err
	}
	logging.From(ctx).Info("event streams in place", "streams", []string{StreamSteps, StreamResults},
		"replicas", b.Replication.Replicas, "why", b.Replication.Reason)
	return b, nil
}

// Check says whether the credentials options go together, without
// reading their files: a user with its password file, or a credentials
// file, or neither. Its error wraps ErrCredentials.
func (opts BusOptions) Check() error {
	switch {
	case opts.User != "" && opts.CredsFile != "":
		return fmt.Errorf("%w: a user (%s) and a credentials file (%s); give one", ErrCredentials, opts.User, opts.CredsFile)
	case opts.User != "" && opts.PasswordFile == "":
		return fmt.Errorf("%w: user %s without a password file", ErrCredentials, opts.User)
	case opts.User == "" && opts.PasswordFile != "":
		return fmt.Errorf("%w: a password file (%s) without a user", ErrCredentials, opts.PasswordFile)
	}
	return nil
}

// auth is how the connection authenticates: a credentials file, or a
// user and the password read from its file.
func (opts BusOptions) auth() ([]nats.Option, error) {
	if err := opts.Check(); err != nil {
		return nil, err
	}
	switch {
	case opts.CredsFile != "":
		return []nats.Option{nats.UserCredentials(opts.CredsFile)}, nil
	case opts.User != "":
		password, err := readPassword(opts.PasswordFile)
		if err != nil {
			return nil, err
		}
		return []nats.Option{nats.UserInfo(opts.User, password)}, nil
	}
	return nil, nil
}

// readPassword reads a password file, without its trailing newline.
func readPassword(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%w: read password file: %w", ErrCredentials, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPasswordFile+1))
	if err != nil {
		return "", fmt.Errorf("%w: read password file %s: %w", ErrCredentials, path, err)
	}
	if len(b) > maxPasswordFile {
		return "", fmt.Errorf("%w: password file %s is over %d bytes", ErrCredentials, path, maxPasswordFile)
	}
	password := strings.TrimRight(string(b), "\r\n")
	if password == "" {
		return "", fmt.Errorf("%w: password file %s is empty", ErrCredentials, path)
	}
	return password, nil
}

// RedactURL is a NATS URL, or a comma-separated list of them, with the
// user information's secret replaced: the password of user:password, the
// token of a URL whose user is a token. Logs and errors show it instead.
func RedactURL(s string) string {
	urls := strings.Split(s, ",")
	for i, raw := range urls {
		u, err := neturl.Parse(strings.TrimSpace(raw))
		if err != nil || u.User == nil {
			continue
		}
		if _, ok := u.User.Password(); ok {
			u.User = neturl.UserPassword(u.User.Username(), "redacted")
		} else {
			u.User = neturl.User("redacted")
		}
		urls[i] = u.String()
	}
	return strings.Join(urls, ",")
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
