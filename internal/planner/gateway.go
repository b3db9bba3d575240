package planner

import (
	"strings"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
)

// The gateway of the replace strategy (seed 002): a CAPO OpenStackServer
// whose lifecycle is its own. Its name carries a hash of its flavor and
// image (v1alpha1.Gateway.ServerName), so a change of either is a new
// server: it is built and waited for beside the old one, and only then is
// the old one deleted. ferry deletes only OpenStackServers it labelled for
// the plan (observed.LabelPlan), never one a user made.

// gateway returns the plan's gateway, or nil.
func (c *planCtx) gateway() *v1alpha1.Gateway {
	if r := c.plan.Spec.Replace; r != nil {
		return r.Gateway
	}
	return nil
}

// ours reports whether ferry created the OpenStackServer for this plan.
func (c *planCtx) ours(s *observed.OpenStackServer) bool {
	return s != nil && s.Plan == c.plan.Metadata.Name
}

// gatewayBridge adds, before the VPN overlay, the gateway's steps: the
// identity Secret CAPO builds it with, the OpenStackServer, the wait for
// its server to be ACTIVE, and the deletion of the generations it replaces.
func gatewayBridge(c *planCtx, b *phaseBuilder) {
	g := c.gateway()
	if g == nil || c.gatewayRetired() {
		return
	}
	if len(g.Name) > v1alpha1.MaxGatewayName {
		b.block("spec.replace.gateway.name %q is longer than %d characters: with its hash suffix the server's name would not be a DNS-1123 label", g.Name, v1alpha1.MaxGatewayName)
	}
	b.identitySecret(c)
	b.group()
	want := g.ServerName()
	cur := c.snap.Gateway(want)
	if cur != nil && !c.ours(cur) {
		b.block("OpenStackServer %s/%s exists and ferry did not create it for plan %s (no label %s=%s): ferry neither takes it over nor deletes it; "+
			"delete or rename it, or change spec.replace.gateway.name", c.ns, want, c.plan.Metadata.Name, observed.LabelPlan, c.plan.Metadata.Name)
	}
	ours := c.ours(cur)
	old := c.oldGateways(want)
	b.step(ours, step.Kube, step.Create, step.Target{Kind: step.OpenStackServer, Name: want}, c.gatewayParams(g, old),
		"the VPN gateway (seed 002), built by CAPO with a lifecycle of its own")
	b.group()
	b.step(ours && cur.Ready, step.Kube, step.Wait, step.Target{Kind: step.OpenStackServer, Name: want},
		step.NewParams(step.ParamFor, step.ForActive, step.ParamTimeout, c.waitTimeout()),
		"the gateway serves before the old one goes and before the overlay uses it")
	b.group()
	for _, o := range old {
		b.step(false, step.Kube, step.Delete, step.Target{Kind: step.OpenStackServer, Name: o.Name},
			step.NewParams(step.ParamGateway, o.Gateway, step.ParamTimeout, c.waitTimeout()),
			"replaced by "+want+", whose server is ACTIVE")
	}
	b.group()
}

// gatewayRetired reports whether cleanup has started (ferry acted on it):
// from then on the gateway is cleanup's to remove, not network-bridge's to
// build again.
func (c *planCtx) gatewayRetired() bool {
	return c.plan.PhaseIndex(c.snap.Record.Approved) >= c.plan.PhaseIndex(v1alpha1.PhaseCleanup)
}

// gatewayParams are the create step's parameters: what CAPO builds the
// server from, and the generations it replaces.
func (c *planCtx) gatewayParams(g *v1alpha1.Gateway, old []observed.OpenStackServer) step.Params {
	network := c.plan.Spec.Target.Network
	if g.Network != nil {
		network = *g.Network
	}
	var replaces []string
	for _, o := range old {
		replaces = append(replaces, o.Name)
	}
	return step.NewParams(
		step.ParamGateway, g.Name,
		step.ParamFlavor, g.Flavor,
		step.ParamImage, g.Image,
		step.ParamNetwork, step.Resource(network.ID != "", network.ID+network.Name),
		step.ParamSecurityGroups, joinComma(g.SecurityGroups),
		step.ParamSSHKeyName, c.plan.Spec.Target.SSHKey.Name,
		step.ParamIdentityRef, c.identityRef(),
		step.ParamReplaces, joinComma(replaces),
	)
}

// oldGateways are the OpenStackServers ferry created for this plan other
// than want: earlier generations, or gateways the plan no longer names.
func (c *planCtx) oldGateways(want string) []observed.OpenStackServer {
	var out []observed.OpenStackServer
	for _, s := range c.snap.Gateways {
		if c.ours(&s) && s.Name != want {
			out = append(out, s)
		}
	}
	return out
}

// gatewayCleanup deletes every OpenStackServer ferry created for the plan.
// One with the gateway's name that ferry did not create stays, and the
// inventory says so.
func gatewayCleanup(c *planCtx, b *phaseBuilder) {
	for _, s := range c.snap.Gateways {
		if !c.ours(&s) {
			continue
		}
		b.step(false, step.Kube, step.Delete, step.Target{Kind: step.OpenStackServer, Name: s.Name},
			step.NewParams(step.ParamGateway, s.Gateway, step.ParamTimeout, c.waitTimeout()),
			"ferry created the gateway for this migration only")
	}
	b.group()
}

// cleanupInventory lists, once cleanup is approved, what the cleanup
// phase removes and what it leaves of the old cloud and of the move, and
// why, for the operator (Result.Inventory).
func cleanupInventory(c *planCtx) {
	if c.plan.PhaseIndex(c.plan.Spec.Approve) < c.plan.PhaseIndex(v1alpha1.PhaseCleanup) {
		return
	}
	s := c.snap
	add := func(gone bool, resource, reason string) {
		state := InventoryToRemove
		if gone {
			state = InventoryRemoved
		}
		c.inventory = append(c.inventory, InventoryItem{Resource: resource, State: state, Reason: reason})
	}
	for _, md := range c.plan.Spec.Replace.OldMachineDeployments {
		d := s.MachineDeployment(md)
		add(d == nil, step.MachineDeployment+" "+c.ns+"/"+md, "named in spec.replace.oldMachineDeployments")
		if d != nil && d.InfrastructureRef.Kind != "" {
			c.leave(d.InfrastructureRef.Kind+" "+c.ns+"/"+d.InfrastructureRef.Name,
				"the old cloud's machine template: ferry deletes only what the plan names or ferry created")
		}
	}
	if s.Workload != nil {
		for _, name := range c.oldNodes() {
			add(s.Node(name) == nil, step.Node+" "+name, "a node of the old pools")
		}
	}
	for _, gw := range s.Gateways {
		if c.ours(&gw) {
			add(false, step.OpenStackServer+" "+c.ns+"/"+gw.Name, "the gateway ferry created (label "+observed.LabelPlan+"="+c.plan.Metadata.Name+")")
		} else {
			c.leave(step.OpenStackServer+" "+c.ns+"/"+gw.Name, "ferry did not create it (no label "+observed.LabelPlan+"="+c.plan.Metadata.Name+")")
		}
	}
	if g := c.gateway(); g != nil && s.Gateway(g.ServerName()) == nil {
		add(true, step.OpenStackServer+" "+c.ns+"/"+g.ServerName(), "the gateway ferry created")
	}
	if s.Cloud != nil {
		for _, r := range s.Cloud.Tagged {
			add(false, "OpenStack "+strings.Replace(r, "/", " ", 1), "tagged ferry-plan="+c.plan.Metadata.Name)
		}
	}
}

// leave records a resource the cleanup leaves in place, and why.
func (c *planCtx) leave(resource, reason string) {
	c.inventory = append(c.inventory, InventoryItem{Resource: resource, State: InventoryLeft, Reason: reason})
}
