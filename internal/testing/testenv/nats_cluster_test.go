package testenv_test

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestNATSCluster proves the three nodes are one JetStream cluster with
// real routes: an R3 stream has a peer on every node, it goes on taking
// messages with its leader stopped and with a node cut off, and a stopped
// node comes back on its store and catches up. Then, the stopped node
// among them, every node still takes clients over TLS only (TLS).
func TestNATSCluster(t *testing.T) {
	c := testenv.StartNATSCluster(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	js := c.JetStream

	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "CLUSTER", Subjects: []string{"cluster.>"}, Storage: jetstream.FileStorage, Replicas: 3,
	})
	if err != nil {
		t.Fatalf("create an R3 stream: %v", err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	if info.Cluster == nil || info.Cluster.Name != "ferry-test" || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream cluster info %+v; want cluster ferry-test, a leader and two other peers", info.Cluster)
	}
	publish := func(js jetstream.JetStream, what string) {
		t.Helper()
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		// JetStream answers nothing while a new leader is elected: ask
		// again, as a client does.
		for {
			// Each attempt briefly: a publish sent while the stream has
			// no leader is lost, and would wait out the whole deadline.
			actx, cancel := context.WithTimeout(pctx, 2*time.Second)
			_, err := js.Publish(actx, "cluster."+what, []byte(what), jetstream.WithMsgID(what))
			cancel()
			if err == nil {
				return
			}
			if pctx.Err() != nil {
				t.Fatalf("publish %s: %v", what, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	publish(js, "before")

	// Stop the leader: the other two elect one and keep the stream.
	leader := c.StreamLeader(t, "CLUSTER")
	c.Stop(t, leader)
	if c.Server(leader) != nil {
		t.Fatalf("node %d still runs after Stop", leader)
	}
	publish(js, "leader-down")
	if now := c.StreamLeader(t, "CLUSTER"); now == leader {
		t.Fatalf("stopped node %d still leads the stream", leader)
	}
	c.Restart(t, leader)

	// Cut another node off: the remaining two still take messages from a
	// client of theirs, and the one cut off has caught up after Heal.
	cut := (leader + 1) % 3
	c.Partition(t, cut)
	nc, err := nats.Connect(c.ClientURL((cut+1)%3), nats.RootCAs(c.CA))
	if err != nil {
		t.Fatalf("connect to node %d: %v", (cut+1)%3, err)
	}
	defer nc.Close()
	majority, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	publish(majority, "partitioned")
	c.Heal(t, cut)
	publish(js, "healed")

	// Every node, the restarted and the healed one among them, ends up
	// with all four messages in its own store.
	deadline := time.Now().Add(time.Minute)
	for i := range c.Len() {
		for {
			var msgs uint64
			if s := c.Server(i); s != nil {
				// The node's own view (its store), not the leader's.
				if jsz, err := s.Jsz(&server.JSzOptions{Streams: true}); err == nil {
					for _, acc := range jsz.AccountDetails {
						for _, sd := range acc.Streams {
							if sd.Name == "CLUSTER" {
								msgs = sd.State.Msgs
							}
						}
					}
				}
			}
			if msgs == 4 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s holds %d messages of CLUSTER; want 4", c.Name(i), msgs)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	t.Run("TLS", func(t *testing.T) { tlsOnly(t, c) })
}

// tlsOnly checks that c takes its clients as docs/install.md's cluster
// does: every node requires TLS of its clients and of its routes, and
// verifies its routes' certificates; a role's user with the CA
// (RoleOptions: tls://, --nats-ca) connects over TLS; the same user and
// password without the CA (the system's roots) are refused the nodes'
// certificate; and a client that speaks plain text is cut off before
// the server reads its password. (TestRolePermissions, in
// internal/events, checks what each role's user may do once connected.)
func tlsOnly(t *testing.T, c *testenv.NATSCluster) {
	ctx, cancel := context.WithTimeout(logging.With(t.Context(), testenv.Logger(t)), time.Minute)
	defer cancel()
	for i := range c.Len() {
		v, err := c.Server(i).Varz(nil)
		if err != nil {
			t.Fatal(err)
		}
		if !v.TLSRequired || !v.Cluster.TLSRequired || !v.Cluster.TLSVerify {
			t.Errorf("node %s: TLS required of clients %t, of routes %t, routes verified %t; want all", c.Name(i), v.TLSRequired, v.Cluster.TLSRequired, v.Cluster.TLSVerify)
		}
	}

	// The reconciler: an executor would wait for the streams it makes.
	role := c.RoleOptions(events.RoleReconciler)
	b, err := events.Connect(ctx, role)
	if err != nil {
		t.Fatalf("connect as %s with the CA: %v", role.User, err)
	}
	if !b.Conn.TLSRequired() {
		t.Errorf("%s's connection is not over TLS", role.User)
	}
	b.Close()

	untrusting := role
	untrusting.TLSCA = ""
	if b, err := events.Connect(ctx, untrusting); !errors.As(err, new(x509.UnknownAuthorityError)) {
		if err == nil {
			b.Close()
		}
		t.Errorf("connect as %s without the CA: %v; want the nodes' certificate refused (unknown authority)", role.User, err)
	}

	// Plain text, with the right password: nats.go would upgrade to TLS
	// by itself, so this is the protocol by hand.
	password, err := os.ReadFile(role.PasswordFile)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(strings.Split(role.URL, ",")[0])
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read the INFO of %s: %v", u.Host, err)
	}
	var info struct {
		TLSRequired bool `json:"tls_required"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(line), "INFO ")), &info); err != nil || !info.TLSRequired {
		t.Errorf("%s says %q (%v); want tls_required", u.Host, line, err)
	}
	connect, _ := json.Marshal(map[string]any{"user": role.User, "pass": strings.TrimSpace(string(password)), "verbose": true})
	if _, err := fmt.Fprintf(conn, "CONNECT %s\r\nPING\r\n", connect); err != nil {
		t.Fatal(err)
	}
	// The server takes the CONNECT for the start of a TLS handshake, which
	// it is not, and closes the connection (a reset, with the CONNECT
	// unread): no +OK to the login (verbose), no PONG.
	rest, err := io.ReadAll(r)
	if strings.Contains(string(rest), "+OK") || strings.Contains(string(rest), "PONG") {
		t.Errorf("a plain-text client of %s: answered %q (then %v); want the connection closed unanswered", u.Host, rest, err)
	}
}
