package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
)

// The overlay: a VPN between two clouds whose nodes reach each other's
// addresses but not each other's pods, as the replace scenario's old and
// new nodes (seed 003). A pod of this DaemonSet on each node (host
// network, privileged) keeps a kernel VXLAN device and, for every node
// whose address is on another network than its own, a route to that
// node's pods (Node.spec.podCIDR) through the tunnel, flannel's layout:
//
//	route <podCIDR> via <podCIDR's first address> dev ferry-vx onlink
//	neighbour <podCIDR's first address> is the far node's tunnel MAC
//	forwarding entry: that MAC is behind the far node's address
//
// Each tunnel end's MAC derives from its node's address, so nothing is
// published. Nodes of the same network are left to their own routes.
// On SIGTERM the device goes, and with it every route through it: pods of
// the two clouds no longer reach each other.
//
// Its health is judged by traffic: each pass it calls the overlay pod of
// every far node at that node's tunnel address, through the tunnel, and
// /ready (on peerPort, the pod's readiness probe) answers 200 only while
// every far node answered within readyWithin. A tunnel whose packets do
// not cross (a firewall on the WAN, a wrong VXLAN port) leaves the pods
// Running and not Ready, and the DaemonSet short of available pods.
const (
	vxlanName = "ferry-vx"
	vxlanID   = 4242
	vxlanPort = 4789
	// vxlanOverhead is what VXLAN over IPv4 adds to a packet.
	vxlanOverhead = 50
	overlayEvery  = 2 * time.Second
	peerPort      = "9420"
	readyWithin   = 10 * time.Second
)

func overlay() error {
	self := os.Getenv("NODE_NAME")
	if self == "" {
		return errors.New("overlay: NODE_NAME is not set (the downward API's spec.nodeName)")
	}
	api, err := inCluster()
	if err != nil {
		return err
	}
	h := &health{answered: map[string]time.Time{}}
	// Not ready before the first pass.
	h.set(nil)
	go func() { _ = http.ListenAndServe(":"+peerPort, h) }() //nolint:gosec // a test's probe port
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(overlayEvery)
	defer tick.Stop()
	last := ""
	for {
		state, err := syncOverlay(api, self, h)
		if err != nil {
			state = "error: " + err.Error()
			h.set(nil)
		}
		if state != last { // say what changed, not every pass
			fmt.Println("overlay:", state)
			last = state
		}
		select {
		case <-sig:
			if link, err := netlink.LinkByName(vxlanName); err == nil {
				return netlink.LinkDel(link)
			}
			return nil
		case <-tick.C:
		}
	}
}

// node is what the overlay reads of a Node.
type node struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		PodCIDR string `json:"podCIDR"`
	} `json:"spec"`
	Status struct {
		Addresses []struct {
			Type, Address string
		} `json:"addresses"`
	} `json:"status"`
}

func (n node) internalIP() net.IP {
	for _, a := range n.Status.Addresses {
		if a.Type == "InternalIP" {
			return net.ParseIP(a.Address).To4()
		}
	}
	return nil
}

// health is what the overlay pod knows of its far nodes: when each last
// answered through the tunnel.
type health struct {
	mu       sync.Mutex
	far      []string // node names
	answered map[string]time.Time
}

// set makes far the nodes to reach (nil: none reachable, not ready).
func (h *health) set(far map[string]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.far = nil
	if far == nil {
		h.far = []string{"(no tunnel)"}
	}
	for name, ok := range far {
		h.far = append(h.far, name)
		if ok {
			h.answered[name] = time.Now()
		}
	}
	slices.Sort(h.far)
}

func (h *health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/peer" {
		fmt.Fprintln(w, "ok")
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var silent []string
	for _, name := range h.far {
		if time.Since(h.answered[name]) > readyWithin {
			silent = append(silent, name)
		}
	}
	if len(silent) > 0 {
		http.Error(w, "no answer through the tunnel from "+strings.Join(silent, ", "), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintf(w, "%d far nodes answered through the tunnel\n", len(h.far))
}

// syncOverlay makes the tunnel and its routes what the Nodes say, calls
// each far node's overlay pod through it, and describes them.
func syncOverlay(api *apiClient, self string, h *health) (string, error) {
	var list struct{ Items []node }
	if err := api.get("/api/v1/nodes", &list); err != nil {
		return "", err
	}
	i := slices.IndexFunc(list.Items, func(n node) bool { return n.Metadata.Name == self })
	if i < 0 {
		return "", fmt.Errorf("node %s not found", self)
	}
	me := list.Items[i]
	ip := me.internalIP()
	_, podNet, err := net.ParseCIDR(me.Spec.PodCIDR)
	if ip == nil || err != nil {
		return "", fmt.Errorf("node %s has no InternalIP or podCIDR (%q) yet", self, me.Spec.PodCIDR)
	}
	parent, local, err := linkOf(ip)
	if err != nil {
		return "", err
	}
	vx, err := ensureVXLAN(parent, ip, podNet.IP)
	if err != nil {
		return "", err
	}
	want := map[string]bool{}
	peers := map[string]bool{}
	desc := fmt.Sprintf("node %s (%s), tunnel %s on %s", self, ip, vxlanName, parent.Attrs().Name)
	for _, n := range list.Items {
		far := n.internalIP()
		_, cidr, err := net.ParseCIDR(n.Spec.PodCIDR)
		if far == nil || err != nil || local.Contains(far) {
			continue
		}
		vtep, mac := cidr.IP, tunnelMAC(far)
		neigh := &netlink.Neigh{LinkIndex: vx.Attrs().Index, State: netlink.NUD_PERMANENT, IP: vtep, HardwareAddr: mac}
		fdb := &netlink.Neigh{LinkIndex: vx.Attrs().Index, Family: syscall.AF_BRIDGE, Flags: netlink.NTF_SELF, State: netlink.NUD_PERMANENT, IP: far, HardwareAddr: mac}
		route := &netlink.Route{LinkIndex: vx.Attrs().Index, Dst: cidr, Gw: vtep, Flags: int(netlink.FLAG_ONLINK)}
		for what, err := range map[string]error{"neighbour": netlink.NeighSet(neigh), "forwarding entry": netlink.NeighSet(fdb), "route": netlink.RouteReplace(route)} {
			if err != nil {
				return "", fmt.Errorf("%s for node %s: %w", what, n.Metadata.Name, err)
			}
		}
		want[cidr.String()] = true
		reached := callPeer(vtep)
		peers[n.Metadata.Name] = reached
		desc += fmt.Sprintf("; %s via %s (%s, answers: %t)", cidr, n.Metadata.Name, far, reached)
	}
	routes, err := netlink.RouteList(vx, netlink.FAMILY_V4)
	if err != nil {
		return "", err
	}
	for _, r := range routes {
		if r.Dst != nil && r.Gw != nil && !want[r.Dst.String()] { // a node gone
			if err := netlink.RouteDel(&r); err != nil {
				return "", err
			}
		}
	}
	h.set(peers)
	return desc, nil
}

// peerClient calls far overlay pods; a call that takes longer counts as
// no answer.
var peerClient = &http.Client{Timeout: time.Second}

// callPeer reports whether the overlay pod at tunnel address vtep
// answers.
func callPeer(vtep net.IP) bool {
	resp, err := peerClient.Get("http://" + net.JoinHostPort(vtep.String(), peerPort) + "/peer")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// linkOf is the link that holds ip and the network it is on.
func linkOf(ip net.IP) (netlink.Link, *net.IPNet, error) {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, nil, err
	}
	for _, a := range addrs {
		if a.IP.Equal(ip) {
			link, err := netlink.LinkByIndex(a.LinkIndex)
			return link, &net.IPNet{IP: a.IP.Mask(a.Mask), Mask: a.Mask}, err
		}
	}
	return nil, nil, fmt.Errorf("no link holds %s", ip)
}

// ensureVXLAN makes the tunnel device on parent, from ip, with the node's
// first pod address as its own, unless it is there.
func ensureVXLAN(parent netlink.Link, ip, vtep net.IP) (netlink.Link, error) {
	if link, err := netlink.LinkByName(vxlanName); err == nil {
		return link, nil
	}
	vx := &netlink.Vxlan{
		LinkAttrs: netlink.LinkAttrs{Name: vxlanName, MTU: parent.Attrs().MTU - vxlanOverhead, HardwareAddr: tunnelMAC(ip)},
		VxlanId:   vxlanID, VtepDevIndex: parent.Attrs().Index, SrcAddr: ip, Port: vxlanPort,
	}
	if err := netlink.LinkAdd(vx); err != nil {
		return nil, fmt.Errorf("add %s: %w", vxlanName, err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: vtep, Mask: net.CIDRMask(32, 32)}}
	if err := netlink.AddrAdd(vx, addr); err != nil {
		return nil, err
	}
	return vx, netlink.LinkSetUp(vx)
}

// tunnelMAC is the tunnel end's MAC of the node at ip: locally
// administered, the address in its last four bytes.
func tunnelMAC(ip net.IP) net.HardwareAddr {
	return net.HardwareAddr{0x0a, 0x58, ip[0], ip[1], ip[2], ip[3]}
}

// apiClient reads the API server as the pod's ServiceAccount.
type apiClient struct {
	base string
	hc   *http.Client
}

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount/"

func inCluster() (*apiClient, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	ca, err := os.ReadFile(saDir + "ca.crt")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New(saDir + "ca.crt holds no certificate")
	}
	return &apiClient{
		base: "https://" + net.JoinHostPort(host, port),
		hc:   &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}},
	}, nil
}

func (a *apiClient) get(path string, v any) error {
	req, err := http.NewRequest(http.MethodGet, a.base+path, nil)
	if err != nil {
		return err
	}
	token, err := os.ReadFile(saDir + "token") // the kubelet rotates it
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+string(token))
	resp, err := a.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
