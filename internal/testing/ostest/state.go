package ostest

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/keypairs"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	"github.com/gophercloud/gophercloud/v2/pagination"
	"golang.org/x/crypto/ssh"

	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// CloudState is what the fixture's project holds, one line per resource,
// with IDs, addresses and the fixture's suffix written as names, so that
// the states of two fixtures that went through the same migration compare
// equal line by line.
type CloudState struct {
	// Lines describe the servers, ports, security groups, keypairs and
	// floating IPs, sorted.
	Lines []string
	// Repeated lists the names that more than one resource of a kind
	// carries: a keypair, security group, server or port created twice.
	Repeated []string
	// Normalize writes the fixture's IDs (project, networks, subnets,
	// routers, servers, ports, security groups, floating IPs, image,
	// flavor), addresses, key fingerprint and random suffix as names, for
	// other texts (objects' specs) to compare across fixtures.
	Normalize func(string) string
}

// project is what the fixture's project holds, each listed once.
type project struct {
	servers  []servers.Server
	ports    []ports.Port
	groups   []groups.SecGroup
	routers  []routers.Router
	subnets  []subnets.Subnet
	fips     []floatingips.FloatingIP
	keypairs []keypairs.KeyPair
}

// list reads every page of a listing with extract, naming what in errors.
func list[T any](ctx context.Context, what string, pager pagination.Pager, extract func(pagination.Page) ([]T, error)) ([]T, error) {
	pages, err := pager.AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	return extract(pages)
}

func (a *Adoptable) project(ctx context.Context, userCompute *gophercloud.ServiceClient) (*project, error) {
	p := &project{}
	var err error
	net, pid := a.admin.Network, a.ProjectID
	if p.servers, err = a.ProjectServers(ctx); err != nil {
		return nil, err
	}
	if p.ports, err = list(ctx, "ports", ports.List(net, ports.ListOpts{ProjectID: pid}), ports.ExtractPorts); err != nil {
		return nil, err
	}
	if p.groups, err = list(ctx, "security groups", groups.List(net, groups.ListOpts{ProjectID: pid}), groups.ExtractGroups); err != nil {
		return nil, err
	}
	if p.routers, err = list(ctx, "routers", routers.List(net, routers.ListOpts{ProjectID: pid}), routers.ExtractRouters); err != nil {
		return nil, err
	}
	if p.subnets, err = list(ctx, "subnets", subnets.List(net, subnets.ListOpts{}), subnets.ExtractSubnets); err != nil {
		return nil, err
	}
	if p.fips, err = list(ctx, "floating IPs", floatingips.List(net, floatingips.ListOpts{ProjectID: pid}), floatingips.ExtractFloatingIPs); err != nil {
		return nil, err
	}
	if p.keypairs, err = list(ctx, "keypairs", keypairs.List(userCompute, nil), keypairs.ExtractKeyPairs); err != nil {
		return nil, err
	}
	return p, nil
}

// State reads the project's cloud state.
func (a *Adoptable) State(ctx context.Context, t testenv.T) (*CloudState, error) {
	t.Helper()
	p, err := a.project(ctx, a.UserCompute(t))
	if err != nil {
		return nil, err
	}
	norm := a.normalizer(p)
	st := &CloudState{Normalize: norm}
	named := map[string]int{} // kind and name -> resources
	add := func(kind, name, line string) {
		if name != "" {
			named[kind+" "+norm(name)]++
		}
		st.Lines = append(st.Lines, norm(kind+" "+line))
	}
	for _, s := range p.servers {
		add("server", s.Name, fmt.Sprintf("%s: %s, security groups %v", s.Name, s.Status, securityGroups(s.SecurityGroups)))
	}
	for _, port := range p.ports {
		var ips []string
		for _, ip := range port.FixedIPs {
			ips = append(ips, ip.IPAddress)
		}
		sort.Strings(ips)
		add("port", port.Name, fmt.Sprintf("%s on %s (%s): device %s, ips %v, security groups %v",
			port.Name, port.NetworkID, port.DeviceOwner, port.DeviceID, ips, slices.Sorted(slices.Values(port.SecurityGroups))))
	}
	for _, g := range p.groups {
		add("security-group", g.Name, fmt.Sprintf("%s: %d rules", g.Name, len(g.Rules)))
	}
	for _, k := range p.keypairs {
		add("keypair", k.Name, k.Name+": "+k.Fingerprint)
	}
	for _, f := range p.fips {
		add("floating-ip", f.FloatingIP, fmt.Sprintf("%s: port %s", f.FloatingIP, f.PortID))
	}
	sort.Strings(st.Lines)
	for key, n := range named {
		if n > 1 {
			st.Repeated = append(st.Repeated, fmt.Sprintf("%s ×%d", key, n))
		}
	}
	sort.Strings(st.Repeated)
	return st, nil
}

// normalizer replaces the fixture's IDs, addresses, key fingerprint and
// random suffix with stable names. An address is replaced only whole: the
// fixture's 10.0.0.1 is not the start of a new port's 10.0.0.17.
func (a *Adoptable) normalizer(p *project) func(string) string {
	pairs := map[string]string{
		a.ProjectID: "<project>", a.NetworkID: "<network>", a.ExternalNetworkID: "<external-network>",
		a.ImageID: "<image>", a.FlavorID: "<flavor>",
	}
	addrs := map[string]string{a.Endpoint: "<endpoint-ip>", a.EndpointFIP: "<endpoint-fip>"}
	for node, id := range a.Servers {
		pairs[id] = "<server " + node + ">"
	}
	for node, ip := range a.Addresses {
		addrs[ip] = "<ip " + node + ">"
	}
	for _, r := range p.routers {
		pairs[r.ID] = "<router " + r.Name + ">"
	}
	for _, g := range p.groups {
		pairs[g.ID] = "<security-group " + g.Name + ">"
	}
	for _, s := range p.subnets {
		if s.NetworkID == a.NetworkID || s.NetworkID == a.ExternalNetworkID {
			pairs[s.ID] = "<subnet " + s.Name + ">"
			addrs[s.CIDR] = "<cidr " + s.Name + ">"
		}
	}
	for _, port := range p.ports {
		name := port.Name
		if name == "" {
			device := pairs[port.DeviceID]
			if device == "" {
				device = port.DeviceID
			}
			name = port.DeviceOwner + " " + device
		}
		pairs[port.ID] = "<port " + name + ">"
	}
	if key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(a.PublicKey)); err == nil {
		pairs[ssh.FingerprintLegacyMD5(key)] = "<fingerprint of the fixture's public key>"
	}
	ids := idReplacer(pairs, a.Suffix)
	return func(s string) string {
		s = ipv4.ReplaceAllStringFunc(s, func(ip string) string {
			if name, ok := addrs[ip]; ok {
				return strings.ReplaceAll(name, a.Suffix, "<suffix>")
			}
			return ip
		})
		return ids.Replace(s)
	}
}

// idReplacer replaces each ID of pairs with its name, and suffix with
// "<suffix>", in names too. Longest first, so that an ID is not replaced
// inside a longer one.
func idReplacer(pairs map[string]string, suffix string) *strings.Replacer {
	olds := make([]string, 0, len(pairs))
	for old := range pairs {
		if old != "" {
			olds = append(olds, old)
		}
	}
	slices.SortFunc(olds, func(x, y string) int { return len(y) - len(x) })
	var args []string
	for _, old := range olds {
		args = append(args, old, strings.ReplaceAll(pairs[old], suffix, "<suffix>"))
	}
	return strings.NewReplacer(append(args, suffix, "<suffix>")...)
}

// ipv4 matches a whole IPv4 address or CIDR.
var ipv4 = regexp.MustCompile(`\b\d{1,3}(?:\.\d{1,3}){3}(?:/\d{1,2})?\b`)
