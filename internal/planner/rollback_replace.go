package planner

import (
	"slices"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
)

// The undo of the replace strategy's phases. Where adopt's undo removes
// objects without any controller acting on it (the servers were there
// before), replace's undo deletes what ferry had built through the
// controllers (the new machines' servers, the gateway, the
// OpenStackCluster's resources are ferry's), and moves the workload back
// under the same promises as the cutover: one node at a time, the
// PodDisruptionBudgets respected, the probe answering between nodes.

// undoReplace lists the steps that undo a replace phase.
func undoReplace(c *planCtx, b *phaseBuilder) {
	switch b.phase.Name {
	case v1alpha1.PhaseCutover:
		undoCutover(c, b)
	case v1alpha1.PhaseWorkers:
		undoNewWorkers(c, b)
	case v1alpha1.PhaseInfrastructure:
		undoInfrastructure(c, b)
	case v1alpha1.PhaseNetworkBridge:
		undoNetworkBridge(c, b)
	case v1alpha1.PhasePrepare:
		undoPrepare(c, b)
	}
}

// workloadReachable blocks the phase when the workload cluster cannot be
// read while its kubeconfig Secret is there; ok is false then, or when
// nothing reaches it any more.
func (c *planCtx) workloadReachable(b *phaseBuilder) bool {
	if c.snap.Workload != nil {
		return true
	}
	if c.snap.Secret(c.ns, c.name+"-kubeconfig") != nil {
		b.block("workload cluster %s unreachable (%s): its nodes decide the steps", c.name, c.snap.WorkloadError)
	}
	return false
}

// undoCutover uncordons the old nodes ferry cordoned.
func undoCutover(c *planCtx, b *phaseBuilder) {
	if !c.workloadReachable(b) {
		return
	}
	for _, name := range c.oldNodes() {
		if n := c.snap.Node(name); n != nil {
			b.step(!n.CordonedByFerry, step.Workload, step.Uncordon, step.Target{Kind: step.Node, Name: name}, nil,
				"the old node takes pods again before the new ones are emptied")
		}
	}
	b.group()
}

// undoNewWorkers empties the new nodes one at a time, as the cutover
// emptied the old ones, then deletes the new pools: CAPI deletes their
// machines and CAPO their servers, which ferry had built.
func undoNewWorkers(c *planCtx, b *phaseBuilder) {
	s := c.snap
	var pools []string
	for _, o := range s.CreatedIn(v1alpha1.PhaseWorkers) {
		if o.Kind == step.MachineDeployment {
			pools = append(pools, o.Name)
		}
	}
	if len(pools) > 0 && c.workloadReachable(b) {
		cut := c.plan.Spec.Cutover
		for _, md := range pools {
			for _, m := range s.MachinesOf(md) {
				n := s.Node(m.NodeRef)
				if n == nil {
					continue
				}
				b.step(n.Unschedulable, step.Workload, step.Cordon, step.Target{Kind: step.Node, Name: n.Name}, nil, "no new pods on the new node")
				b.group()
				b.step(n.Unschedulable && n.PodsToEvict == 0, step.Workload, step.Drain, step.Target{Kind: step.Node, Name: n.Name},
					c.drainParams(), "its pods go back to the old nodes")
				b.group()
				if cut.ProbeURL != "" {
					node := step.Target{Kind: step.Node, Name: n.Name}
					b.step(s.Checked(b.key(step.Probe, node)), step.Workload, step.Probe, node,
						step.NewParams(step.ParamURL, cut.ProbeURL, step.ParamExpect, step.Expect2xx),
						"the application still answers before the next node")
					b.group()
				}
			}
		}
	}
	for _, md := range pools {
		b.step(false, step.Kube, step.Delete, step.Target{Kind: step.MachineDeployment, Name: md}, nil,
			"a pool ferry created: CAPI deletes its machines and CAPO their servers")
	}
	b.group()
	c.removeCreated(b, v1alpha1.PhaseWorkers, step.MachineDeployment)
}

// undoInfrastructure switches the Cluster back to the infrastructure it
// had, deletes the cloud controller manager ferry applied and the
// OpenStackCluster ferry created (CAPO removes what it built for it),
// then the identity Secret ferry copied.
func undoInfrastructure(c *planCtx, b *phaseBuilder) {
	s := c.snap
	if c.plan.Spec.Target.ControlPlane.Provider == v1alpha1.ProviderKubeadm && c.switched() {
		b.block("the control plane was rolled onto OpenStack machines: ferry does not roll a KubeadmControlPlane back; roll back to infrastructure instead")
		return
	}
	if cl := s.Cluster; cl != nil && cl.PreviousInfrastructure != nil {
		b.step(cl.Paused, step.Kube, step.Pause, step.Target{Kind: step.Cluster, Name: c.name}, nil,
			"no reconciliation while the infrastructure is switched back")
		b.group()
		b.step(false, step.Kube, step.Restore, step.Target{Kind: step.Cluster, Name: c.name}, nil,
			"back to "+step.Ref(cl.PreviousInfrastructure.Kind, cl.PreviousInfrastructure.Name)+", the infrastructure it had before ferry")
		b.group()
	}
	if cl := s.Cluster; cl != nil {
		b.step(!cl.Paused || !cl.ByFerry, step.Kube, step.Unpause, step.Target{Kind: step.Cluster, Name: c.name}, nil,
			"the rollback paused it; CAPO must act on the OpenStackCluster's deletion")
		b.group()
	}
	c.undoManifest(b)
	if s.IsCreated(step.OpenStackCluster, c.name) {
		b.step(false, step.Kube, step.Delete, step.Target{Kind: step.OpenStackCluster, Name: c.name}, nil,
			"ferry created it: CAPO deletes what it built for it")
		b.group()
	}
	c.removeCreated(b, v1alpha1.PhaseInfrastructure, step.OpenStackCluster)
}

// undoNetworkBridge deletes the VPN overlay's objects ferry created and
// the gateway servers ferry built, then the identity Secret ferry copied.
func undoNetworkBridge(c *planCtx, b *phaseBuilder) {
	if paths := c.overlay(); len(paths) > 0 && c.workloadReachable(b) {
		for _, p := range paths {
			b.step(!c.snap.Manifest(p).Created, step.Workload, step.Delete, step.Target{Kind: step.Manifest, Name: p}, nil,
				"the overlay's objects ferry's apply created go; those that were there before stay")
		}
		b.group()
	}
	for _, g := range c.snap.Gateways {
		if c.ours(&g) {
			b.step(false, step.Kube, step.Delete, step.Target{Kind: step.OpenStackServer, Name: g.Name},
				step.NewParams(step.ParamGateway, g.Gateway, step.ParamTimeout, c.waitTimeout()),
				"a gateway ferry built: CAPO deletes its server")
		}
	}
	b.group()
	c.removeCreated(b, v1alpha1.PhaseNetworkBridge)
}

// undoPrepare lifts ferry's pause of the old pools and deletes the keypair
// ferry created.
func undoPrepare(c *planCtx, b *phaseBuilder) {
	for _, md := range c.plan.Spec.Replace.OldMachineDeployments {
		if d := c.snap.MachineDeployment(md); d != nil {
			b.step(!d.Paused || !d.ByFerry, step.Kube, step.Unpause, step.Target{Kind: step.MachineDeployment, Name: md}, nil,
				"ferry paused the old pool for the move; it scales again")
		}
	}
	b.group()
	c.undoKeypair(b)
}

// removeCreated removes what ferry created in phase, tier by tier, but
// the kinds deleted through their controllers (or later).
func (c *planCtx) removeCreated(b *phaseBuilder, phase string, except ...string) {
	c.removeCreatedIf(b, phase, func(o observed.Created) bool { return !slices.Contains(except, o.Kind) })
}

// removeCreatedIf removes what ferry created in phase that keep selects,
// tier by tier.
func (c *planCtx) removeCreatedIf(b *phaseBuilder, phase string, keep func(observed.Created) bool) {
	created := slices.DeleteFunc(c.snap.CreatedIn(phase), func(o observed.Created) bool { return !keep(o) })
	for _, tier := range removalTiers {
		for _, o := range created {
			if slices.Contains(tier, o.Kind) {
				b.step(false, step.Kube, step.Remove, step.Target{Kind: o.Kind, Name: o.Name}, nil, removeReason(o))
			}
		}
		b.group()
	}
}
