package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Real nodes: containerd, runc and the CNI plugins from Debian
// (containerd, runc, containernetworking-plugins) and the kubelet and
// kube-proxy of the pinned Kubernetes version (`make tools`), one set per
// node, each node in a network namespace of its own, as a server on a
// network. Their pods are containers: they run the test images
// (TestImages) or ferry's own (`make image`), listen at their IPs and
// talk to each other.
//
// The layout, for network n and the k-th node of the run:
//
//	host                                   network namespace ferry-<node>
//	  bridge fyb<n> 10.250.n.1/24  ──veth──  fy<n>n<k> 10.250.n.(10+k)
//	  route 10.251.k.0/24 via the node       containerd, kubelet, kube-proxy
//	  (the API server listens on             bridge cni0 10.251.k.1/24: the node's pods
//	   10.250.n.1: KubeOptions.Address)      routes to the pods of the network's other nodes,
//	                                         to the Services (10.0.0.0/24) and the host's
//	                                         services (10.128.0.0/10: OpenStack, floating
//	                                         IPs) via 10.250.n.1,
//	                                         to routed networks' nodes via 10.250.n.1
//
// Nodes of one network reach each other's pods. A node has no default
// route: nodes of two networks reach each other's node addresses only
// once Host.Route joins the networks (the host then forwards between
// them), and never each other's pods, unless an overlay carries them
// (VPNClientManifest).

const (
	netnsPrefix = "ferry-"
	linkPrefix  = "fy"
	// hostLock is the lock that serializes real nodes across the test
	// binaries of one `go test ./...`: each records and restores the
	// host, which two at a time would confuse.
	hostLock = "/run/lock/ferry-real-nodes.lock"
)

// Host is the machine, claimed by one test for its real nodes: NewHost
// waits for any other test binary's real nodes to finish, records the
// machine's state, and at the end of the test puts back what the nodes
// changed and fails the test when the machine then differs from the
// record.
type Host struct {
	t   T
	dir string
	// mu guards what nodes started from a stand-in's goroutine change.
	mu          sync.Mutex
	before      hostState
	cgroupRoots []string
	networks    []*Network
	nodes       int
}

// NewHost claims the machine for t's real nodes.
func NewHost(t T) *Host {
	t.Helper()
	for _, tool := range []string{"containerd", "ctr", "runc", "nsenter", "ip", "iptables-save"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("testenv: real nodes need %s: apt-get install containerd runc containernetworking-plugins iptables iproute2 util-linux (.ci/run installs them)", tool)
		}
	}
	// The nodes' cgroup roots are made in cgroup v1's hierarchies; on a
	// unified (v2) hierarchy the same paths would be child cgroups of the
	// root named after v1's controllers.
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		t.Fatalf("testenv: real nodes need cgroup v1 (this machine mounts cgroup v2 at /sys/fs/cgroup), which is what they were built and tried on")
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		t.Fatalf("testenv: real nodes need the CNI plugins in /usr/lib/cni: apt-get install containernetworking-plugins")
	}
	release := LockHost(t)
	for _, l := range restoreDeadRun() {
		t.Logf("%s", l)
	}
	dir, err := os.MkdirTemp("", "ferry-nodes-")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	h := &Host{t: t, dir: dir}
	h.before = recordHost(nil, []string{dir})
	if err := savePending(h.before, dir); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		defer release()
		defer os.Remove(hostPending)
		restoreHost(t.Logf, h.before, h.cgroupRoots, []string{dir})
		if diff := h.before.diff(recordHost(h.cgroupRoots, []string{dir})); diff != "" {
			t.Errorf("testenv: the real nodes left the machine changed, after putting back what could be:\n%s", diff)
		}
		if failed(t) {
			t.Logf("testenv: the real nodes' logs are in %s", dir)
		} else {
			_ = os.RemoveAll(dir)
		}
	})
	return h
}

// hostLocked is the process's hold on hostLock: flock's locks belong to
// an open file, so a second open in the same process would wait for the
// first; holds within the process are counted instead.
var hostLocked struct {
	sync.Mutex
	file  *os.File
	holds int
}

// LockHost waits until no other test binary has real nodes, and keeps
// them out until release is called: NewHost takes it, and a test that
// records the machine before and after its nodes takes it around both.
func LockHost(t T) (release func()) {
	t.Helper()
	hostLocked.Lock()
	defer hostLocked.Unlock()
	if hostLocked.holds == 0 {
		f, err := os.OpenFile(hostLock, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
		start := time.Now()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			t.Fatalf("testenv: lock %s: %v", hostLock, err)
		}
		if waited := time.Since(start); waited > time.Second {
			t.Logf("testenv: waited %s for another test's real nodes (%s)", waited.Round(time.Second), hostLock)
		}
		hostLocked.file = f
	}
	hostLocked.holds++
	var once sync.Once
	return func() {
		once.Do(func() {
			hostLocked.Lock()
			defer hostLocked.Unlock()
			if hostLocked.holds--; hostLocked.holds == 0 {
				hostLocked.file.Close() // and with it the lock
				hostLocked.file = nil
			}
		})
	}
}

// Network is a network of servers: a bridge on the host, whose address
// the host (and an API server started on it) has on that network.
type Network struct {
	Name   string
	HostIP string
	index  int
	nodes  []*RealNode
	// reach are the other networks' subnets its nodes route through
	// the host (Host.Route).
	reach []string
}

// Subnet is the network's node addresses.
func (n *Network) Subnet() string { return fmt.Sprintf("10.250.%d.0/24", n.index) }

// serviceCIDR is the API server's Service addresses (envtest's
// --service-cluster-ip-range).
const serviceCIDR = "10.0.0.0/24"

// HostServices is the range hack/openstack-up.sh makes this machine's
// addresses (a local route, as 127.0.0.0/8 is): the local OpenStack's
// APIs listen on 10.128.0.1 and the tests' floating IPs are in it, where
// their API servers listen. Every node routes it through its network's
// host address, so that pods reach the cloud and its clusters' endpoints
// as pods in a data centre do.
const HostServices = "10.128.0.0/10"

// Route joins two networks as two clouds on a WAN: the host forwards
// between them (net.ipv4.ip_forward, set back when the test ends), and
// their nodes, those there and those to come, route the other's subnet
// through it. Pods' addresses stay unrouted between them.
func (h *Host) Route(a, b *Network) {
	h.t.Helper()
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		h.t.Fatalf("testenv: forward between networks %s and %s: %v", a.Name, b.Name, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range [][2]*Network{{a, b}, {b, a}} {
		from, to := p[0], p[1]
		from.reach = append(from.reach, to.Subnet())
		for _, n := range from.nodes {
			if err := inNode(n, "ip", "route", "add", to.Subnet(), "via", from.HostIP); err != nil {
				h.t.Fatalf("testenv: %v", err)
			}
		}
	}
	h.t.Logf("testenv: networks %s (%s) and %s (%s) routed through the host", a.Name, a.Subnet(), b.Name, b.Subnet())
}

// Drop makes the host drop what it forwards between networks a and b
// (both ways) to a port of a protocol, as a firewall on the WAN between
// two clouds would, until undo is called (or the test ends).
func (h *Host) Drop(a, b *Network, proto string, port int) (undo func()) {
	h.t.Helper()
	rule := func(from, to *Network) []string {
		return []string{"FORWARD", "-i", from.bridge(), "-o", to.bridge(), "-p", proto, "--dport", strconv.Itoa(port), "-j", "DROP"}
	}
	for _, r := range [][]string{rule(a, b), rule(b, a)} {
		h.mustRun("iptables", append([]string{"-I"}, r...)...)
	}
	h.t.Logf("testenv: the host drops %s to port %d between networks %s and %s", proto, port, a.Name, b.Name)
	return func() {
		for _, r := range [][]string{rule(a, b), rule(b, a)} {
			h.mustRun("iptables", append([]string{"-D"}, r...)...)
		}
		h.t.Logf("testenv: the host forwards %s to port %d between networks %s and %s again", proto, port, a.Name, b.Name)
	}
}

// Network creates the bridge of network name (the host's n-th, from 0).
func (h *Host) Network(name string) *Network {
	h.t.Helper()
	n := &Network{Name: name, index: len(h.networks)}
	n.HostIP = fmt.Sprintf("10.250.%d.1", n.index)
	bridge := n.bridge()
	// A MAC address of its own: a bridge without one takes the lowest of
	// its ports' and changes it when a node joins with a lower one. The
	// nodes that had resolved the host address to the old one then send
	// to a port's address, which the host drops as another host's, until
	// their neighbour entry expires: about 45 seconds in which a node's
	// kubelet cannot reach its API server (seen in CI: a Lease not
	// created 30 seconds after its node registered).
	mac := fmt.Sprintf("02:fe:0a:fa:%02x:01", n.index)
	h.mustRun("ip", "link", "add", bridge, "address", mac, "type", "bridge")
	h.mustRun("ip", "addr", "add", n.HostIP+"/24", "dev", bridge)
	h.mustRun("ip", "link", "set", bridge, "up")
	h.networks = append(h.networks, n)
	h.t.Logf("testenv: network %s: bridge %s, host address %s", name, bridge, n.HostIP)
	return n
}

func (n *Network) bridge() string { return fmt.Sprintf("%sb%d", linkPrefix, n.index) }

func (h *Host) mustRun(name string, args ...string) {
	h.t.Helper()
	if err := run(name, args...); err != nil {
		h.t.Fatalf("testenv: %v", err)
	}
}

// run runs a command on the host.
func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// inNode runs a command in node's network namespace.
func inNode(node *RealNode, name string, args ...string) error {
	c := node.command(append([]string{name}, args...)...)
	return run(c[0], c[1:]...)
}

// command is a command line that runs args in the node's network
// namespace.
func (n *RealNode) command(args ...string) []string {
	return append([]string{"nsenter", "--net=" + n.netnsPath()}, args...)
}

// RealNode is a node of RealNodes.
type RealNode struct {
	Name, IP, PodCIDR string
	Network           *Network
	index             int
	dir, sockets      string
	stopped           bool // by StopNode
}

func (n *RealNode) netns() string      { return netnsPrefix + n.Name }
func (n *RealNode) netnsPath() string  { return "/run/netns/" + n.netns() }
func (n *RealNode) cgroupRoot() string { return "/" + netnsPrefix + n.Name }

// socket is containerd's socket: in the host's directory by the node's
// index, since a socket's path has at most 104 bytes, and a path under
// the node's directory, named after a Machine, can be longer.
func (n *RealNode) socket() string {
	return filepath.Join(n.sockets, fmt.Sprintf("containerd-%d.sock", n.index))
}

// ctr runs containerd's client against the node's containerd, in the
// namespace of Kubernetes' containers.
func (n *RealNode) ctr(args ...string) ([]byte, error) {
	return exec.Command("ctr", append([]string{"--address", n.socket(), "--namespace", "k8s.io"}, args...)...).CombinedOutput()
}

// NodeSpec is a real node to start: its name, its network, the taints
// its kubelet registers it with, and the labels it carries once it
// registered (its kubelet may not set node-role labels itself, as with
// kubeadm).
type NodeSpec struct {
	Name    string
	Network *Network
	Labels  map[string]string
	Taints  []corev1.Taint
	// ProviderID is the kubelet's --provider-id: none, as with kubeadm
	// without a cloud provider, or the machine's, as a cloud's image
	// sets it.
	ProviderID string
}

// RealNodes are the real nodes of one cluster, with the real scheduler
// and controller manager that run its Deployments and DaemonSets.
type RealNodes struct {
	host   *Host
	kube   *Kube
	ms     *Managers
	bin    string // the Kubernetes programs
	images []string
	mu     sync.Mutex
	nodes  map[string]*RealNode
	failed map[string]error // the nodes that did not start, and why
}

// StartNodes starts the scheduler and the controller manager of k, whose
// API server must have been started with KubeOptions{PKI, Address (a
// network's HostIP), Nodes: true}, and a real node for each spec, with
// images (image tarballs) and TestImages imported. It returns once every
// node is Ready. Everything stops when the test ends; the logs of a
// failed test are kept and named.
func (h *Host) StartNodes(k *Kube, images []string, specs ...NodeSpec) *RealNodes {
	t := h.t
	t.Helper()
	if k.pki == nil || !k.nodes {
		t.Fatalf("testenv: real nodes need an API server started with KubeOptions{PKI, Address, Nodes: true}")
	}
	bin := kubeBinaries(t)
	for _, name := range []string{"kube-scheduler", "kube-controller-manager", "kubelet", "kube-proxy"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			t.Fatalf("testenv: %s not found in %s: run `make tools` (`make test` builds it when missing)", name, bin)
		}
	}
	logDir, err := os.MkdirTemp(h.dir, "cluster-")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	rn := &RealNodes{host: h, kube: k, bin: bin, images: append(TestImages(t), images...), nodes: map[string]*RealNode{}, failed: map[string]error{},
		ms: &Managers{LogDir: logDir, procs: map[string]*managerProc{}, kube: k}}
	t.Cleanup(rn.stop)
	pkiDir := filepath.Join(logDir, "pki")
	if err := os.MkdirAll(pkiDir, 0o700); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	admin, err := rn.kubeconfig("admin", "kubernetes-admin", []string{"system:masters"})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	caFile := filepath.Join(pkiDir, "ca.crt")
	saKey := filepath.Join(pkiDir, "sa.key")
	for path, data := range map[string][]byte{caFile: k.pki.CA.Cert, saKey: k.pki.ServiceAccount.Key} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatalf("testenv: %v", err)
		}
	}
	for name, args := range controlPlanePrograms(admin, "--root-ca-file="+caFile, "--service-account-private-key-file="+saKey,
		"--use-service-account-credentials", "--controllers=*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller") {
		if _, err := rn.ms.start(name, filepath.Join(bin, name), args); err != nil {
			t.Fatalf("testenv: %v", err)
		}
	}
	for _, s := range specs {
		rn.AddNode(s)
	}
	return rn
}

// NodePool is where a stand-in for a machine's boot (the Docker
// stand-in, ostest.Boot) starts the machine's node: hollow kubelets
// (Managers) or real ones on a network (RealNodes.On).
type NodePool interface {
	// AddNode starts a node and returns once it is Ready; called again
	// for a node that started, it does nothing.
	AddNode(ctx context.Context, t T, n Node) error
	// StopNode ends a node as its machine's deletion would.
	StopNode(name string)
	// Kind says what a node of the pool is, for logs.
	Kind() string
}

// On is the pool of real nodes on network: the stand-ins' machines
// become servers there.
func (rn *RealNodes) On(network *Network) NodePool { return realPool{rn, network} }

type realPool struct {
	rn  *RealNodes
	net *Network
}

func (p realPool) Kind() string { return "real kubelet on network " + p.net.Name }

func (p realPool) AddNode(ctx context.Context, _ T, n Node) error {
	if p.rn.Node(n.Name) != nil { // started before: wait for it
		p.rn.mu.Lock()
		err := p.rn.failed[n.Name]
		p.rn.mu.Unlock()
		if err != nil {
			return err
		}
		return p.rn.ms.nodesReady(ctx, p.rn.kube.Client, []string{n.Name})
	}
	var taints []corev1.Taint
	for _, text := range n.Taints {
		ts, _, err := taintsOf(text)
		if err != nil {
			return err
		}
		taints = append(taints, ts...)
	}
	_, err := p.rn.addNode(ctx, NodeSpec{Name: n.Name, Network: p.net, Labels: n.Labels, Taints: taints, ProviderID: n.ProviderID})
	return err
}

func (p realPool) StopNode(name string) { p.rn.StopNode(name) }

// taintsOf reads a taint as Node.Taints has it: "<key>=<value>:<effect>"
// or "<key>:<effect>".
func taintsOf(text string) ([]corev1.Taint, string, error) {
	kv, effect, ok := strings.Cut(text, ":")
	if !ok {
		return nil, "", fmt.Errorf("taint %q: want <key>[=<value>]:<effect>", text)
	}
	key, value, _ := strings.Cut(kv, "=")
	return []corev1.Taint{{Key: key, Value: value, Effect: corev1.TaintEffect(effect)}}, effect, nil
}

// kubeconfig writes a kubeconfig for a client certificate of cn in
// groups, signed by the cluster's CA, and returns its path.
func (rn *RealNodes) kubeconfig(file, cn string, groups []string) (string, error) {
	kp, err := rn.kube.pki.CA.sign(cn, groups)
	if err != nil {
		return "", fmt.Errorf("client certificate for %s: %w", cn, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: rn.kube.Config.Host, CertificateAuthorityData: rn.kube.pki.CA.Cert}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: kp.Cert, ClientKeyData: kp.Key}
	cfg.Contexts["cluster"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "user"}
	cfg.CurrentContext = "cluster"
	path := filepath.Join(rn.ms.LogDir, "pki", file+".kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// AddNode starts one more real node and returns once it is Ready and
// carries the spec's labels and taints.
func (rn *RealNodes) AddNode(s NodeSpec) *RealNode {
	t := rn.host.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, err := rn.addNode(ctx, s)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return n
}

// addNode is AddNode, safe to call from a stand-in's goroutine.
func (rn *RealNodes) addNode(ctx context.Context, s NodeSpec) (_ *RealNode, err error) {
	start := time.Now()
	n, err := rn.host.server(s.Name, s.Network, rn.ms.LogDir)
	if err != nil {
		return nil, fmt.Errorf("real node %s: %w", s.Name, err)
	}
	rn.mu.Lock()
	rn.nodes[s.Name] = n
	rn.mu.Unlock()
	defer func() {
		if err != nil { // for a second call: a node starts once
			rn.mu.Lock()
			rn.failed[s.Name] = err
			rn.mu.Unlock()
		}
	}()
	for _, start := range []func() error{
		func() error { return rn.startContainerd(ctx, n) },
		func() error { return rn.startKubelet(n, s) },
		func() error { return rn.startKubeProxy(n) },
	} {
		if err := start(); err != nil {
			return nil, fmt.Errorf("real node %s: %w (logs in %s)", n.Name, err, n.dir)
		}
	}
	if err := rn.ms.nodesReady(ctx, rn.kube.Client, []string{n.Name}); err != nil {
		return nil, fmt.Errorf("real node %s not Ready: %w (logs in %s)", n.Name, err, n.dir)
	}
	// Its labels (the taints the kubelet registered itself) and its pod
	// addresses, as the controller manager's node IPAM would set them
	// (switched off: the node's CNI configuration holds them already).
	var node corev1.Node
	if err := rn.kube.Client.Get(ctx, client.ObjectKey{Name: n.Name}, &node); err != nil {
		return nil, err
	}
	// A patch, not an update: the kubelet writes the Node meanwhile, and
	// a conflict here would leave the node unlabelled for good.
	base := node.DeepCopy()
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	maps.Copy(node.Labels, s.Labels)
	node.Spec.PodCIDR, node.Spec.PodCIDRs = n.PodCIDR, []string{n.PodCIDR}
	if err := rn.kube.Client.Patch(ctx, &node, client.MergeFrom(base)); err != nil {
		return nil, fmt.Errorf("label node %s and set its podCIDR: %w", n.Name, err)
	}
	rn.host.t.Logf("testenv: real node %s (%s, pods %s, network %s, files %s) Ready in %s", n.Name, n.IP, n.PodCIDR, s.Network.Name, n.dir, time.Since(start).Round(100*time.Millisecond))
	return n, nil
}

// server makes the machine of a node called name on network: a network
// namespace, a veth into the network's bridge, routes to the other
// nodes' pods and from the host to its own, and its cgroup root.
func (h *Host) server(name string, network *Network, logDir string) (*RealNode, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := &RealNode{Name: name, Network: network, index: h.nodes}
	h.nodes++
	n.IP = fmt.Sprintf("10.250.%d.%d", network.index, 10+n.index)
	n.PodCIDR = fmt.Sprintf("10.251.%d.0/24", n.index)
	// Its directory by index: sockets live under it (the kubelet's pod
	// resources among them), and a socket's path has at most 104 bytes,
	// which a Machine's name can use up.
	n.dir, n.sockets = filepath.Join(logDir, fmt.Sprintf("node-%d", n.index)), h.dir
	h.cgroupRoots = append(h.cgroupRoots, n.cgroupRoot())
	for _, d := range []string{"containerd", "cni/net.d", "cni/ipam", "kubelet/root", "kubelet/pki", "kubelet/pods", "kubelet/plugins"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	hostEnd, nodeEnd := n.links()
	cmds := [][]string{
		{"ip", "netns", "add", n.netns()},
		{"ip", "link", "add", hostEnd, "type", "veth", "peer", "name", nodeEnd, "netns", n.netns()},
		{"ip", "link", "set", hostEnd, "master", network.bridge(), "up"},
		n.command("ip", "addr", "add", n.IP+"/24", "dev", nodeEnd),
		n.command("ip", "link", "set", nodeEnd, "up"),
		n.command("ip", "link", "set", "lo", "up"),
	}
	for _, dst := range append([]string{serviceCIDR, HostServices}, network.reach...) {
		cmds = append(cmds, n.command("ip", "route", "add", dst, "via", network.HostIP))
	}
	for _, other := range network.nodes {
		cmds = append(cmds,
			n.command("ip", "route", "add", other.PodCIDR, "via", other.IP),
			other.command("ip", "route", "add", n.PodCIDR, "via", n.IP))
	}
	cmds = append(cmds, []string{"ip", "route", "add", n.PodCIDR, "via", n.IP, "dev", network.bridge()})
	for _, c := range cmds {
		if err := run(c[0], c[1:]...); err != nil {
			return nil, err
		}
	}
	network.nodes = append(network.nodes, n)

	// Its cgroup root, in every hierarchy (cpuset's needs its CPUs and
	// memory nodes copied down).
	for _, c := range cgroupControllers {
		if err := os.MkdirAll(filepath.Join("/sys/fs/cgroup", c, n.cgroupRoot()), 0o755); err != nil && c != "systemd" && c != "hugetlb" {
			return nil, fmt.Errorf("cgroup %s%s: %w", c, n.cgroupRoot(), err)
		}
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		data, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuset", f))
		if err == nil {
			err = os.WriteFile(filepath.Join("/sys/fs/cgroup/cpuset", n.cgroupRoot(), f), data, 0o644)
		}
		if err != nil {
			return nil, fmt.Errorf("cgroup cpuset%s: %w", n.cgroupRoot(), err)
		}
	}
	return n, nil
}

// links are the names of the node's veth: its end on the host's bridge
// and its own.
func (n *RealNode) links() (hostEnd, nodeEnd string) {
	return fmt.Sprintf("%s%dh%d", linkPrefix, n.Network.index, n.index), fmt.Sprintf("%s%dn%d", linkPrefix, n.Network.index, n.index)
}

// StopNode ends a node as its machine's deletion would: its containers
// are killed, its kubelet, kube-proxy and containerd stop, and its link
// to the network goes down. The Node object stays, NotReady, for its
// Machine's deletion to remove.
func (rn *RealNodes) StopNode(name string) {
	n := rn.Node(name)
	if n == nil || n.stopped {
		return
	}
	n.stopped = true
	rn.ms.terminate(name+"-kubelet", 5*time.Second)
	rn.ms.terminate(name+"-kube-proxy", 5*time.Second)
	if out, err := n.ctr("tasks", "list", "--quiet"); err == nil {
		for _, id := range strings.Fields(string(out)) {
			_, _ = n.ctr("tasks", "kill", "--signal", "SIGKILL", id)
		}
	}
	rn.ms.terminate(name+"-containerd", 5*time.Second)
	hostEnd, _ := n.links()
	_ = run("ip", "link", "set", hostEnd, "down")
	rn.host.t.Logf("testenv: real node %s stopped", name)
}

// ContainerLog returns what a container of a pod on one of the nodes
// wrote, as `kubectl logs` would (its current and earlier runs, in
// order), read from the node's pod logs.
func (rn *RealNodes) ContainerLog(namespace, pod, container string) string {
	var out strings.Builder
	for _, n := range rn.nodes {
		files, _ := filepath.Glob(filepath.Join(n.dir, "kubelet", "pods", namespace+"_"+pod+"_*", container, "*.log"))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				fmt.Fprintf(&out, "%s: %v\n", f, err)
				continue
			}
			out.Write(data)
		}
	}
	return out.String()
}

// Kubectl is the path of the kubectl of the pinned Kubernetes version
// (`make tools`), whose `apply -k` installs deploy/ as docs/install.md
// says.
func Kubectl(t T) string {
	t.Helper()
	path := filepath.Join(kubeBinaries(t), "kubectl")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("testenv: kubectl not found in %s: run `make tools` (`make test` builds it when missing)", filepath.Dir(path))
	}
	return path
}

// Node returns the node called name.
func (rn *RealNodes) Node(name string) *RealNode {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	return rn.nodes[name]
}

func (rn *RealNodes) startContainerd(ctx context.Context, n *RealNode) error {
	c := filepath.Join(n.dir, "containerd")
	config := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = %[3]q
[ttrpc]
  address = "%[3]s.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  # Root here lacks CAP_SYS_RESOURCE: without this every sandbox fails
  # with "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[6]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[7]q
    max_conf_num = 1
`, filepath.Join(c, "root"), filepath.Join(c, "state"), n.socket(), filepath.Join(c, "opt"), PauseImage,
		filepath.Join(c, "runc"), filepath.Join(n.dir, "cni", "net.d"))
	// ipMasq off: a pod's calls leave with its own address, which the
	// tests look at.
	cni := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "pods",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, filepath.Join(n.dir, "cni", "ipam"), n.PodCIDR)
	if err := write(filepath.Join(c, "config.toml"), config); err != nil {
		return err
	}
	if err := write(filepath.Join(n.dir, "cni", "net.d", "10-pods.conflist"), cni); err != nil {
		return err
	}
	if err := rn.startIn(n, "containerd", "containerd", "--config", filepath.Join(c, "config.toml")); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := n.ctr("version")
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("containerd did not answer: %w: %s (log %s)", err, out, rn.ms.LogFile(n.Name+"-containerd"))
		}
		if err := rn.ms.exitedOne(n.Name + "-containerd"); err != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, img := range rn.images {
		if out, err := n.ctr("images", "import", "--no-unpack", img); err != nil {
			return fmt.Errorf("import %s: %w: %s", img, err, out)
		}
	}
	return nil
}

func (rn *RealNodes) startKubelet(n *RealNode, s NodeSpec) error {
	k := filepath.Join(n.dir, "kubelet")
	kubeconfig, err := rn.kubeconfig(n.Name+"-kubelet", "system:node:"+n.Name, []string{"system:nodes"})
	if err != nil {
		return err
	}
	caFile := filepath.Join(rn.ms.LogDir, "pki", "ca.crt")
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: %[1]s
failSwapOn: false
failCgroupV1: false
address: %[2]s
port: 10250
healthzBindAddress: 127.0.0.1
healthzPort: 10248
readOnlyPort: 0
podCIDR: %[3]s
podLogsDir: %[4]s
containerRuntimeEndpoint: unix://%[5]s
imageServiceEndpoint: unix://%[5]s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[6]s}
authorization:
  mode: Webhook
evictionHard: {memory.available: "1%%", nodefs.available: "1%%", nodefs.inodesFree: "1%%", imagefs.available: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
resolvConf: /etc/resolv.conf
`, n.cgroupRoot(), n.IP, n.PodCIDR, filepath.Join(k, "pods"), n.socket(), caFile)
	if err := write(filepath.Join(k, "config.yaml"), config); err != nil {
		return err
	}
	args := []string{"--config", filepath.Join(k, "config.yaml"), "--kubeconfig", kubeconfig,
		"--root-dir", filepath.Join(k, "root"), "--cert-dir", filepath.Join(k, "pki"), "--volume-plugin-dir", filepath.Join(k, "plugins"),
		"--hostname-override", n.Name, "--node-ip", n.IP, "-v", "1"}
	var taints []string
	for _, taint := range s.Taints {
		taints = append(taints, taint.ToString())
	}
	if len(taints) > 0 {
		args = append(args, "--register-with-taints="+strings.Join(taints, ","))
	}
	if s.ProviderID != "" {
		args = append(args, "--provider-id", s.ProviderID)
	}
	return rn.startIn(n, "kubelet", filepath.Join(rn.bin, "kubelet"), args...)
}

func (rn *RealNodes) startKubeProxy(n *RealNode) error {
	kubeconfig, err := rn.kubeconfig(n.Name+"-kube-proxy", "system:kube-proxy", nil)
	if err != nil {
		return err
	}
	config := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %q}
hostnameOverride: %s
mode: iptables
clusterCIDR: 10.251.0.0/16
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`, kubeconfig, n.Name)
	path := filepath.Join(n.dir, "kube-proxy.yaml")
	if err := write(path, config); err != nil {
		return err
	}
	return rn.startIn(n, "kube-proxy", filepath.Join(rn.bin, "kube-proxy"), "--config", path, "-v", "1")
}

func write(path, data string) error { return os.WriteFile(path, []byte(data), 0o600) }

// startIn starts a program of node n in its network namespace; its log
// is <node>-<name>.log.
func (rn *RealNodes) startIn(n *RealNode, name, path string, args ...string) error {
	c := n.command(append([]string{path}, args...)...)
	_, err := rn.ms.start(n.Name+"-"+name, c[0], c[1:])
	return err
}

// stop ends the nodes as a cluster's operator would: the controllers
// first, so that nothing recreates pods, then every pod (the kubelets
// stop their containers and tear their networks down), then the
// kubelets, kube-proxies and containerds. What still runs is the host's
// to clean up (NewHost).
func (rn *RealNodes) stop() {
	t := rn.host.t
	for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
		rn.ms.terminate(name, 10*time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var pods corev1.PodList
	if err := rn.kube.Client.List(ctx, &pods); err == nil {
		for i := range pods.Items {
			_ = rn.kube.Client.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0))
		}
	}
	for _, n := range rn.nodes {
		for !n.stopped {
			out, err := n.ctr("tasks", "list", "--quiet")
			if err != nil || strings.TrimSpace(string(out)) == "" || ctx.Err() != nil {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	for _, n := range rn.nodes {
		if n.stopped {
			continue
		}
		rn.ms.terminate(n.Name+"-kubelet", 15*time.Second)
		rn.ms.terminate(n.Name+"-kube-proxy", 10*time.Second)
		if out, err := n.ctr("tasks", "list", "--quiet"); err == nil && len(strings.TrimSpace(string(out))) > 0 {
			t.Logf("testenv: node %s: containers left running after its pods were deleted: %s", n.Name, strings.Fields(string(out)))
			for _, id := range strings.Fields(string(out)) {
				_, _ = n.ctr("tasks", "kill", "--signal", "SIGKILL", id)
			}
		}
		rn.ms.terminate(n.Name+"-containerd", 15*time.Second)
	}
	if failed(t) {
		for name, p := range rn.ms.procs {
			t.Logf("testenv: %s's log is %s; its last errors:\n%s", name, p.log, lastErrors(p.log, 10))
		}
	}
}

// LinkStats are the packets a link of a node received and sent, as its
// kernel counts them (`ip -s link`).
func (rn *RealNodes) LinkStats(node, link string) (rx, tx int, err error) {
	n := rn.Node(node)
	if n == nil {
		return 0, 0, fmt.Errorf("no real node %s", node)
	}
	out, err := exec.Command("ip", "-n", n.netns(), "-s", "-j", "link", "show", link).Output()
	if err != nil {
		return 0, 0, fmt.Errorf("link %s of node %s: %w", link, node, err)
	}
	var links []struct {
		Stats64 struct{ RX, TX struct{ Packets int } } `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return 0, 0, fmt.Errorf("ip -j link show: %w", err)
	}
	if len(links) != 1 {
		return 0, 0, fmt.Errorf("ip -j link show %s on node %s: %q", link, node, out)
	}
	return links[0].Stats64.RX.Packets, links[0].Stats64.TX.Packets, nil
}

// PodIP waits for a pod of namespace/name to have an IP and returns it.
func (rn *RealNodes) PodIP(ctx context.Context, namespace, name string) (string, error) {
	for {
		var p corev1.Pod
		err := rn.kube.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &p)
		if err == nil && p.Status.PodIP != "" {
			return p.Status.PodIP, nil
		}
		last := "no IP yet"
		if err != nil {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("pod %s/%s has no IP: %w (last: %s)", namespace, name, ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
