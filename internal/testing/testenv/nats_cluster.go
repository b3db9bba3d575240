package testenv

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ferry-dev/ferry/internal/events"
)

// natsClusterReady bounds the wait for a cluster, or a node of it, to have
// JetStream running: a meta leader elected and every node caught up.
const natsClusterReady = 60 * time.Second

// NATSCluster is a JetStream cluster of nats-server nodes running in the
// test's process, joined by real cluster routes over loopback TCP. Each
// node has its own client port, route port and file store, so a node can
// be stopped and restarted on the same streams, and each route goes
// through a fault proxy (Proxy), so a node can be cut off from the others.
//
// As docs/install.md sets up a production cluster, every node takes
// clients over TLS only, with a certificate of the cluster's own CA (CA),
// and its routes are TLS too, each node verifying the other's certificate
// against that CA. Its clients authenticate as a user: one per role of
// ferry (events.Roles), allowed what events.RolePermissions allows and
// nothing else, and the test's own, allowed everything. A client without
// a user, or in plain text, is refused.
type NATSCluster struct {
	// URL lists the client URLs of every node, comma-separated, as
	// ferry's --nats-url and nats.Connect take them, with the test's own
	// user in each (tls://testenv:PASSWORD@host:port): every permission.
	// A client of it trusts CA (--nats-ca, nats.RootCAs). ferry's
	// processes take RoleFlags or RoleOptions instead.
	URL string
	// CA is the file holding the certificate (PEM) of the CA that signed
	// the nodes' certificate, for 127.0.0.1 and localhost: what ferry's
	// --nats-ca and nats.RootCAs take.
	CA string
	// Conn is a client connected to the cluster (any node; it fails over)
	// and JetStream its JetStream context.
	Conn      *nats.Conn
	JetStream jetstream.JetStream

	nodes []*natsNode
	// links are the routes: one proxy per ordered pair of nodes, the first
	// dialing the second through it.
	links []natsLink
	// admin is the test's own user; passwordFiles hold each role's
	// password, named after the role's user (natsRoleUser).
	admin         *url.Userinfo
	passwordFiles map[events.Role]string
}

// natsAdmin is the user of the test's own clients.
const natsAdmin = "testenv"

// natsRoleUser is the user of a role: ferry-reconciler, ferry-executor, as
// docs/install.md names them.
func natsRoleUser(role events.Role) string { return "ferry-" + string(role) }

// natsNode is one node: its options, which a restart reuses, and the
// server running now (nil while stopped).
type natsNode struct {
	name     string
	opts     server.Options
	mu       sync.Mutex
	server   *server.Server
	clientAt string
}

// natsLink is the route that node a dials to node b.
type natsLink struct {
	a, b  int
	proxy *Proxy
}

// StartNATSCluster starts n nodes (n >= 1; 3 is the smallest cluster that
// keeps quorum with one node down) as one JetStream cluster named
// "ferry-test" and returns once JetStream has a meta leader and every node
// has caught up with it. Everything is stopped when the test ends. Its CA
// and the nodes' certificate are generated for it, once.
//
// Every node dials every other through a proxy of their own (JetStream
// wants each node to have routes configured; the servers keep one route of
// the two that a pair dials). Each node advertises a route address nobody
// listens on, so that the servers' gossip of each other's addresses opens
// no route around the proxies: a route the gossip names is dialed, refused
// and given up, while the configured ones are dialed again forever.
func StartNATSCluster(t T, n int) *NATSCluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("testenv: a NATS cluster of %d nodes", n)
	}
	c := &NATSCluster{nodes: make([]*natsNode, n), admin: url.UserPassword(natsAdmin, randomHex(16)), passwordFiles: map[events.Role]string{}}
	adminPassword, _ := c.admin.Password()
	users := []*server.User{{Username: natsAdmin, Password: adminPassword}}
	secrets := t.TempDir()
	certs := newNATSTLS(t, secrets)
	c.CA = certs.caFile
	for _, role := range events.Roles {
		password := randomHex(16)
		file := filepath.Join(secrets, natsRoleUser(role))
		if err := os.WriteFile(file, []byte(password+"\n"), 0o600); err != nil {
			t.Fatalf("testenv: %v", err)
		}
		c.passwordFiles[role] = file
		perms := events.RolePermissions(role)
		users = append(users, &server.User{Username: natsRoleUser(role), Password: password, Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: perms.Publish},
			Subscribe: &server.SubjectPermission{Allow: perms.Subscribe},
		}})
	}
	routeAddrs := make([]string, n)
	for i := range c.nodes {
		routeAddrs[i] = FreeAddr(t)
	}
	for i := range n {
		for j := range n {
			if j == i {
				continue
			}
			c.links = append(c.links, natsLink{a: i, b: j, proxy: StartProxy(t, routeAddrs[j])})
		}
	}
	urls := make([]string, n)
	for i := range c.nodes {
		clientAddr := FreeAddr(t)
		opts := server.Options{
			ServerName: fmt.Sprintf("n%d", i),
			Host:       "127.0.0.1",
			Port:       port(t, clientAddr),
			JetStream:  true,
			StoreDir:   t.TempDir(),
			// Bounded, so that three nodes of a loaded test machine do not
			// each claim three quarters of its memory for placement.
			JetStreamMaxMemory: 256 << 20,
			JetStreamMaxStore:  4 << 30,
			Users:              users,
			TLSConfig:          certs.clients,
			TLSTimeout:         natsTLSTimeout,
			Cluster: server.ClusterOpts{
				Name:       "ferry-test",
				Host:       "127.0.0.1",
				Port:       port(t, routeAddrs[i]),
				TLSConfig:  certs.routes,
				TLSTimeout: natsTLSTimeout,
				// Nobody listens on port 1: see above.
				Advertise: "127.0.0.1:1",
				// One route connection per pair, not a pool of them, so
				// that a route is one connection through one proxy.
				PoolSize: -1,
			},
			NoLog:  os.Getenv(natsLogEnv) == "",
			NoSigs: true,
		}
		for _, l := range c.links {
			if l.a == i {
				opts.Routes = append(opts.Routes, &url.URL{Scheme: "nats-route", Host: l.proxy.Addr})
			}
		}
		c.nodes[i] = &natsNode{name: opts.ServerName, opts: opts, clientAt: clientAddr}
		urls[i] = c.ClientURL(i)
	}
	c.URL = strings.Join(urls, ",")
	// Registered before the nodes start, so it runs after the clients'
	// cleanups and the proxies' come after it.
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, node := range c.nodes {
			wg.Add(1)
			go func() { defer wg.Done(); node.stop() }()
		}
		wg.Wait()
	})
	// Start them together: JetStream elects its meta leader once it sees
	// its peers, and a node started alone waits for them.
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, node := range c.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = node.start() }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
	}
	c.waitReady(t)
	var err error
	c.Conn, err = nats.Connect(c.URL, nats.Name("ferry-testenv"), nats.MaxReconnects(-1), nats.RootCAs(c.CA))
	if err != nil {
		t.Fatalf("testenv: connect to the NATS cluster at %s: %v", events.RedactURL(c.URL), err)
	}
	t.Cleanup(c.Conn.Close)
	c.JetStream, err = jetstream.New(c.Conn)
	if err != nil {
		t.Fatalf("testenv: JetStream context: %v", err)
	}
	c.waitPlaceable(t)
	return c
}

// waitPlaceable waits until the meta leader places a stream on every
// node: it does once it has heard each node's statistics, a few seconds
// after the election, and until then refuses ("peer offline").
func (c *NATSCluster) waitPlaceable(t T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), natsClusterReady)
	defer cancel()
	cfg := jetstream.StreamConfig{Name: "TESTENV_PLACEMENT", Subjects: []string{"testenv.placement"}, Storage: jetstream.MemoryStorage, Replicas: len(c.nodes)}
	for {
		actx, acancel := context.WithTimeout(ctx, events.APIAttempt)
		_, err := c.JetStream.CreateStream(actx, cfg)
		if err == nil {
			err = c.JetStream.DeleteStream(actx, cfg.Name)
		}
		acancel()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testenv: the NATS cluster places no stream on its %d nodes after %s: %v", len(c.nodes), natsClusterReady, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// port is the port of a host:port address.
func port(t T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("testenv: address %s: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("testenv: port of %s: %v", addr, err)
	}
	return n
}

// start starts the node's server on its ports and store.
func (n *natsNode) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.server != nil {
		return nil
	}
	// The server keeps and amends the options it is given: a copy each
	// time, so that a restart starts from the same ones.
	opts := n.opts
	opts.Routes = append([]*url.URL(nil), n.opts.Routes...)
	ns, err := server.NewServer(&opts)
	if err != nil {
		return fmt.Errorf("start NATS node %s: %w", n.name, err)
	}
	if os.Getenv(natsLogEnv) != "" {
		ns.SetLoggerV2(nodeLogger{n.name}, false, false, false)
	}
	go ns.Start()
	if !ns.ReadyForConnections(natsClusterReady) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return fmt.Errorf("start NATS node %s on %s: not ready after %s", n.name, n.clientAt, natsClusterReady)
	}
	n.server = ns
	return nil
}

// stop shuts the node's server down, if it runs.
func (n *natsNode) stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.server == nil {
		return
	}
	n.server.Shutdown()
	n.server.WaitForShutdown()
	n.server = nil
}

// running is the node's server, nil while it is stopped.
func (n *natsNode) running() *server.Server {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.server
}

// Len is the number of nodes.
func (c *NATSCluster) Len() int { return len(c.nodes) }

// Name is the server name of node i (n0, n1, ...), as JetStream's cluster
// information names peers and leaders.
func (c *NATSCluster) Name(i int) string { return c.nodes[i].name }

// ClientURL is the client URL of node i alone, with the test's own user
// in it, as in URL; its clients trust CA.
func (c *NATSCluster) ClientURL(i int) string {
	return (&url.URL{Scheme: "tls", User: c.admin, Host: c.nodes[i].clientAt}).String()
}

// RoleOptions are the bus options of a ferry process of role: the role,
// the client URLs of the nodes given (every node without any), tls:// and
// without user information, the role's user and password file, and the
// CA.
func (c *NATSCluster) RoleOptions(role events.Role, nodes ...int) events.BusOptions {
	if len(nodes) == 0 {
		for i := range c.nodes {
			nodes = append(nodes, i)
		}
	}
	urls := make([]string, len(nodes))
	for j, i := range nodes {
		urls[j] = "tls://" + c.nodes[i].clientAt
	}
	return events.BusOptions{Role: role, URL: strings.Join(urls, ","), User: natsRoleUser(role), PasswordFile: c.passwordFiles[role], TLSCA: c.CA}
}

// RoleFlags are RoleOptions(role) as ferry's flags: --nats-url,
// --nats-user, --nats-password-file and --nats-ca. The role is the
// command's (run or executor), not a flag.
func (c *NATSCluster) RoleFlags(role events.Role) []string {
	o := c.RoleOptions(role)
	return []string{"--nats-url", o.URL, "--nats-user", o.User, "--nats-password-file", o.PasswordFile, "--nats-ca", o.TLSCA}
}

// Server is node i's running server, nil while it is stopped.
func (c *NATSCluster) Server(i int) *server.Server { return c.nodes[i].running() }

// Stop shuts node i down, as a crash of its host would, except that the
// server closes its connections rather than leaving them to time out.
// Clients connected to it fail over to another node; its store stays for
// Restart.
func (c *NATSCluster) Stop(t T, i int) {
	t.Helper()
	c.nodes[i].stop()
}

// Restart starts node i again (it is stopped first if it runs) on the same
// ports and store, and returns once it has caught up with the JetStream
// cluster.
func (c *NATSCluster) Restart(t T, i int) {
	t.Helper()
	c.nodes[i].stop()
	if err := c.nodes[i].start(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	c.waitReady(t)
}

// Partition cuts node i off from the other nodes: every route to or from
// it is closed and refused, as by a firewall that rejects the cluster
// port, until Heal. Its clients stay connected to it, as clients on its
// side of a split network would; the others keep quorum if they are a
// majority.
func (c *NATSCluster) Partition(t T, i int) {
	t.Helper()
	for _, l := range c.links {
		if l.a == i || l.b == i {
			l.proxy.Refuse()
		}
	}
}

// Heal ends Partition(i): the routes of node i are let through again and
// the nodes redial them within a few seconds.
func (c *NATSCluster) Heal(t T, i int) {
	t.Helper()
	for _, l := range c.links {
		if l.a == i || l.b == i {
			if err := l.proxy.Pass(); err != nil {
				t.Fatalf("testenv: heal NATS node %s: %v", c.nodes[i].name, err)
			}
		}
	}
}

// StreamLeader is the index of the node that leads stream now, as
// JetStream's stream information says; it waits for an election that is
// under way, and fails the test when there is no leader within a minute.
func (c *NATSCluster) StreamLeader(t T, stream string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), natsClusterReady)
	defer cancel()
	var last string
	for {
		// A round is bounded: a request sent during an election is lost.
		actx, acancel := context.WithTimeout(ctx, events.APIAttempt)
		info, err := streamInfo(actx, c.JetStream, stream)
		acancel()
		if err == nil && info.Cluster != nil {
			for i, node := range c.nodes {
				if node.name == info.Cluster.Leader {
					return i
				}
			}
			last = fmt.Sprintf("leader %q", info.Cluster.Leader)
		}
		if err != nil {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testenv: no leader of stream %s after %s: %s", stream, natsClusterReady, last)
			return -1
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// streamInfo asks JetStream about stream.
func streamInfo(ctx context.Context, js jetstream.JetStream, stream string) (*jetstream.StreamInfo, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	return s.CachedInfo(), nil // js.Stream asked for it just now
}

// waitReady waits until every running node sees a JetStream meta leader
// and is caught up with it.
func (c *NATSCluster) waitReady(t T) {
	t.Helper()
	deadline := time.Now().Add(natsClusterReady)
	for {
		leaders, behind := 0, ""
		for _, node := range c.nodes {
			s := node.running()
			if s == nil {
				continue
			}
			if s.JetStreamIsLeader() {
				leaders++
			}
			if !s.JetStreamIsCurrent() {
				behind = node.name
			}
		}
		if leaders == 1 && behind == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: NATS cluster not ready after %s: %d meta leaders, %q behind", natsClusterReady, leaders, behind)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// natsLogEnv names the environment variable that, set to anything, has the
// nodes log what they do (routes, elections, leaders) to stderr, prefixed
// with their names: what to read when a cluster test fails.
const natsLogEnv = "FERRY_TESTENV_NATS_LOG"

// nodeLogger writes a node's notices, warnings and errors to stderr.
type nodeLogger struct{ name string }

func (l nodeLogger) Noticef(f string, v ...any) { log.Printf(l.name+" "+f, v...) }
func (l nodeLogger) Warnf(f string, v ...any)   { log.Printf(l.name+" WARN "+f, v...) }
func (l nodeLogger) Fatalf(f string, v ...any)  { log.Printf(l.name+" FATAL "+f, v...) }
func (l nodeLogger) Errorf(f string, v ...any)  { log.Printf(l.name+" ERROR "+f, v...) }
func (l nodeLogger) Debugf(string, ...any)      {}
func (l nodeLogger) Tracef(string, ...any)      {}
