package ostest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/keypairs"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	"golang.org/x/crypto/ssh"

	"github.com/ferry-dev/ferry/internal/testenv"
)

// CloudState is what the fixture's project holds, one line per resource,
// with IDs, addresses and the fixture's suffix written as names (see
// Normalizer), so that the states of two fixtures that went through the
// same migration compare equal line by line.
type CloudState struct {
	// Lines describe the servers, ports, security groups, keypairs and
	// floating IPs, sorted.
	Lines []string
	// Repeated lists the names that more than one resource of a kind
	// carries: a keypair, security group, server or port created twice.
	Repeated []string
}

// State reads the project's cloud state.
func (a *Adoptable) State(ctx context.Context, t testenv.T) (*CloudState, *strings.Replacer, error) {
	t.Helper()
	norm, err := a.Normalizer(ctx)
	if err != nil {
		return nil, nil, err
	}
	st := &CloudState{}
	named := map[string]int{} // kind and name -> resources
	add := func(kind, name, line string) {
		if name != "" {
			named[kind+" "+norm.Replace(name)]++
		}
		st.Lines = append(st.Lines, norm.Replace(kind+" "+line))
	}

	srvs, err := a.ProjectServers(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, s := range srvs {
		add("server", s.Name, fmt.Sprintf("%s: %s, security groups %v", s.Name, s.Status, securityGroups(s.SecurityGroups)))
	}
	portPages, err := ports.List(a.admin.Network, ports.ListOpts{ProjectID: a.ProjectID}).AllPages(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list the ports of project %s: %w", a.ProjectID, err)
	}
	portList, err := ports.ExtractPorts(portPages)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range portList {
		var ips []string
		for _, ip := range p.FixedIPs {
			ips = append(ips, ip.IPAddress)
		}
		sort.Strings(ips)
		sgs := slices.Sorted(slices.Values(p.SecurityGroups))
		add("port", p.Name, fmt.Sprintf("%s on %s (%s): device %s, ips %v, security groups %v", p.Name, p.NetworkID, p.DeviceOwner, p.DeviceID, ips, sgs))
	}
	sgPages, err := groups.List(a.admin.Network, groups.ListOpts{ProjectID: a.ProjectID}).AllPages(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list the security groups of project %s: %w", a.ProjectID, err)
	}
	sgList, err := groups.ExtractGroups(sgPages)
	if err != nil {
		return nil, nil, err
	}
	for _, g := range sgList {
		add("security-group", g.Name, fmt.Sprintf("%s: %d rules", g.Name, len(g.Rules)))
	}
	kpPages, err := keypairs.List(a.UserCompute(t), nil).AllPages(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list the project user's keypairs: %w", err)
	}
	kpList, err := keypairs.ExtractKeyPairs(kpPages)
	if err != nil {
		return nil, nil, err
	}
	for _, k := range kpList {
		add("keypair", k.Name, k.Name+": "+k.Fingerprint)
	}
	fipPages, err := floatingips.List(a.admin.Network, floatingips.ListOpts{ProjectID: a.ProjectID}).AllPages(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list the floating IPs of project %s: %w", a.ProjectID, err)
	}
	fipList, err := floatingips.ExtractFloatingIPs(fipPages)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range fipList {
		add("floating-ip", f.FloatingIP, fmt.Sprintf("%s: port %s", f.FloatingIP, f.PortID))
	}
	sort.Strings(st.Lines)
	for key, n := range named {
		if n > 1 {
			st.Repeated = append(st.Repeated, fmt.Sprintf("%s ×%d", key, n))
		}
	}
	sort.Strings(st.Repeated)
	return st, norm, nil
}

// Normalizer replaces the fixture's IDs (project, networks, subnets,
// servers, ports, security groups, floating IPs, image, flavor), its
// addresses and its random suffix with stable names.
func (a *Adoptable) Normalizer(ctx context.Context) (*strings.Replacer, error) {
	pairs := map[string]string{
		a.ProjectID: "<project>", a.NetworkID: "<network>", a.ExternalNetworkID: "<external-network>",
		a.ImageID: "<image>", a.FlavorID: "<flavor>", a.Endpoint: "<endpoint-ip>", a.EndpointFIP: "<endpoint-fip>",
	}
	for node, id := range a.Servers {
		pairs[id] = "<server " + node + ">"
	}
	for node, ip := range a.Addresses {
		pairs[ip] = "<ip " + node + ">"
	}
	portPages, err := ports.List(a.admin.Network, ports.ListOpts{ProjectID: a.ProjectID}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the ports of project %s: %w", a.ProjectID, err)
	}
	portList, err := ports.ExtractPorts(portPages)
	if err != nil {
		return nil, err
	}
	routerPages, err := routers.List(a.admin.Network, routers.ListOpts{ProjectID: a.ProjectID}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the routers of project %s: %w", a.ProjectID, err)
	}
	routerList, err := routers.ExtractRouters(routerPages)
	if err != nil {
		return nil, err
	}
	for _, r := range routerList {
		pairs[r.ID] = "<router " + r.Name + ">"
	}
	for _, p := range portList {
		name := p.Name
		if name == "" {
			device := pairs[p.DeviceID]
			if device == "" {
				device = p.DeviceID
			}
			name = p.DeviceOwner + " " + device
		}
		pairs[p.ID] = "<port " + name + ">"
	}
	if key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(a.PublicKey)); err == nil {
		pairs[ssh.FingerprintLegacyMD5(key)] = "<fingerprint of the fixture's public key>"
	}
	sgPages, err := groups.List(a.admin.Network, groups.ListOpts{ProjectID: a.ProjectID}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the security groups of project %s: %w", a.ProjectID, err)
	}
	sgList, err := groups.ExtractGroups(sgPages)
	if err != nil {
		return nil, err
	}
	for _, g := range sgList {
		pairs[g.ID] = "<security-group " + g.Name + ">"
	}
	subnetPages, err := subnets.List(a.admin.Network, subnets.ListOpts{}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list subnets: %w", err)
	}
	subnetList, err := subnets.ExtractSubnets(subnetPages)
	if err != nil {
		return nil, err
	}
	for _, s := range subnetList {
		if s.NetworkID == a.NetworkID || s.NetworkID == a.ExternalNetworkID {
			pairs[s.ID] = "<subnet " + s.Name + ">"
			pairs[s.CIDR] = "<cidr " + s.Name + ">"
		}
	}
	// The suffix last: names were replaced whole above.
	var args []string
	for _, old := range slices.SortedFunc(func(yield func(string) bool) {
		for k := range pairs {
			if k != "" && !yield(k) {
				return
			}
		}
	}, func(x, y string) int { return len(y) - len(x) }) {
		args = append(args, old, strings.ReplaceAll(pairs[old], a.Suffix, "<suffix>"))
	}
	args = append(args, a.Suffix, "<suffix>")
	return strings.NewReplacer(args...), nil
}
