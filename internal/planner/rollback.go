package planner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
)

// A rollback (spec.rollback) undoes the phases after spec.rollback.to, the
// last first. Each undone phase lists the steps that remove what its
// forward steps made, read from the observed state like every other step:
// the objects ferry created in the phase (observed.Created, marked at
// creation), the Secrets it changed without creating them, the manifests
// it applied and the keypair it created. Nothing else is removed, so that
// nothing that existed before ferry started goes.

// removalTiers are the kinds ferry creates, in the order a rollback
// removes them, one group each: dependents before what they depend on,
// as clusterctl move deletes a moved cluster's source objects in the
// reverse order of their creation.
var removalTiers = [][]string{
	{step.OpenStackServer},
	{step.OpenStackMachine},
	{step.Machine},
	{step.KubeadmConfig, step.MachineSet},
	{step.MachineDeployment, step.KubeadmControlPlane},
	{step.OpenStackMachineTemplate, step.KubeadmConfigTemplate},
	{step.OpenStackCluster},
	{step.Cluster},
	{step.Secret},
}

// notUndone is what undoing a phase leaves as it was, and why, by
// strategy; docs/migrating.md's table says the same.
var notUndone = map[v1alpha1.Strategy]map[string][]string{
	v1alpha1.StrategyAdopt: {
		v1alpha1.PhaseControlPlane: {
			"the provider IDs ferry gave the control-plane Nodes: a Node's spec.providerID cannot be cleared once set",
			"what ferry's apply changed in manifest objects that were there before it (they are not deleted)",
		},
		v1alpha1.PhaseWorkers: {
			"the provider IDs ferry gave the worker Nodes: a Node's spec.providerID cannot be cleared once set",
		},
	},
	v1alpha1.StrategyReplace: {
		v1alpha1.PhaseCutover: {
			"where each pod runs: the old nodes take pods again, and the drain of the new nodes moves the workload back",
		},
		v1alpha1.PhaseInfrastructure: {
			"what ferry's apply changed in manifest objects that were there before it (they are not deleted)",
		},
	},
}

// rollback plans a plan with spec.rollback: the phases it keeps as they
// are (none of them runs while the rollback is asked for), the phases
// after them undone, and the point of no return and what follows it
// pending. Only the last phase with something left to undo is runnable.
func rollback(c *planCtx, res *Result, build map[string]func(*planCtx, *phaseBuilder)) {
	p, s := c.plan, c.snap
	to, _ := p.RollbackTo()
	res.Rollback = p.Spec.Rollback.To
	approved := p.PhaseIndex(p.Spec.Approve)
	last := len(p.Phases())
	if nr := p.PointOfNoReturn(); nr != "" {
		last = p.PhaseIndex(nr)
		if s.Record.Approved != "" && p.PhaseIndex(s.Record.Approved) >= last {
			res.Stopped = fmt.Sprintf("spec.rollback refused: phase %s has begun, and it is the point of no return; nothing is rolled back. Remove spec.rollback", nr)
		}
	}
	blocked := map[string][]string{}
	for i, name := range p.Phases() {
		b := &phaseBuilder{ctx: c, phase: Phase{Name: name}}
		if i <= to || i >= last {
			build[name](c, b)
			ph := b.finish()
			ph.State, ph.Reason = phaseState(ph, nil, i > approved, false, p.Spec.Approve)
			ph.Incomplete = len(b.blocked) > 0
			if ph.State == Approved {
				ph.Reason = "waits while spec.rollback is set"
			}
			res.Phases = append(res.Phases, ph)
			continue
		}
		if p.Spec.Strategy == v1alpha1.StrategyReplace {
			undoReplace(c, b)
		} else {
			undoAdopt(c, b, i == to+1)
		}
		ph := b.finish()
		ph.Undo, ph.Incomplete = true, len(b.blocked) > 0
		ph.State = Approved
		if len(ph.Groups) == 0 && len(b.blocked) == 0 {
			ph.State = RolledBack
		}
		blocked[name] = b.blocked
		res.Phases = append(res.Phases, ph)
	}
	for i, name := range p.Phases() {
		if i > to && i < last {
			res.NotUndone = append(res.NotUndone, notUndone[p.Spec.Strategy][name]...)
		}
	}
	// The last phase first: the phases before it wait for it.
	next := ""
	for i := len(res.Phases) - 1; i >= 0; i-- {
		ph := &res.Phases[i]
		if !ph.Undo || ph.State == RolledBack {
			continue
		}
		switch {
		case next != "":
			ph.Reason = "rolled back after phase " + next
			if len(blocked[ph.Name]) > 0 {
				// Said now, in the preview, not once the phases after
				// it are undone.
				ph.Reason += "; blocked as things are: " + strings.Join(blocked[ph.Name], "; ")
			}
		case len(blocked[ph.Name]) > 0:
			ph.State, ph.Reason = Blocked, strings.Join(blocked[ph.Name], "; ")
			next = ph.Name
		case res.Stopped != "":
			ph.Reason = "stopped: the rollback is refused"
			next = ph.Name
		default:
			res.Runnable, next = ph.Name, ph.Name
		}
	}
	res.RolledBack = next == "" && res.Stopped == ""
}

// undoAdopt lists the steps that undo an adopt phase: the Cluster paused
// while anything of it goes (no controller acts on a removal then), the
// Secrets ferry changed released, the objects ferry created removed tier
// by tier, the cloud controller manager and the keypair ferry created
// deleted, and, by the first phase undone, the pause lifted when the
// Cluster stays.
func undoAdopt(c *planCtx, b *phaseBuilder, first bool) {
	s, phase := c.snap, b.phase.Name
	created := s.CreatedIn(phase)
	cl := s.Cluster
	removesCluster := slices.ContainsFunc(created, func(o observed.Created) bool { return o.Kind == step.Cluster && o.Name == c.name })
	restore := false
	if phase == v1alpha1.PhaseCluster {
		if cl != nil && !removesCluster && cl.InfrastructureRef.Kind == step.OpenStackCluster && cl.PreviousInfrastructure == nil {
			b.block("Cluster %s/%s existed before ferry, and its earlier infrastructureRef was not kept (ferry keeps it since rollbacks came): the cluster phase is not rolled back; remove spec.rollback, or roll back to cluster", c.ns, c.name)
			return
		}
		restore = cl != nil && !removesCluster && cl.PreviousInfrastructure != nil
		if cl == nil || removesCluster {
			c.undoOpenStackCluster(b, true)
		}
		created = slices.DeleteFunc(created, func(o observed.Created) bool { return o.Kind == step.OpenStackCluster })
	}
	release := c.toRelease(phase, created)
	others := slices.ContainsFunc(created, func(o observed.Created) bool { return o.Kind != step.Cluster && o.Kind != step.Secret }) ||
		len(c.nodesToRelease(created)) > 0 || restore
	if cl != nil && (others || len(release) > 0) {
		b.step(cl.Paused, step.Kube, step.Pause, step.Target{Kind: step.Cluster, Name: c.name}, nil,
			"no Cluster API or CAPO controller acts on what the rollback removes while the Cluster is paused")
		b.group()
	}
	if restore {
		prev := "none"
		if r := cl.PreviousInfrastructure; r.Kind != "" {
			prev = step.Ref(r.Kind, r.Name)
		}
		b.step(false, step.Kube, step.Restore, step.Target{Kind: step.Cluster, Name: c.name}, nil,
			"it existed before ferry: its infrastructureRef goes back to "+prev)
	}
	for _, t := range release {
		b.step(false, step.Kube, step.Release, t, nil,
			"it was there before ferry: it loses only the owners and the label ferry's phase gave it, which would take it away or change it")
	}
	c.releaseNodes(b, created)
	if cp := s.ControlPlane; phase == v1alpha1.PhaseControlPlane && cp != nil && cp.Kind == step.KamajiControlPlane {
		b.step(!cp.ChangedByFerry, step.Kube, step.Restore, step.Target{Kind: step.KamajiControlPlane, Name: cp.Name}, nil,
			"its kubelet preferredAddressTypes go back to what they were before ferry changed them")
	}
	b.group()
	// Before the tiers: undoing phase cluster removes the Secrets that
	// reach the workload cluster and the cloud.
	if phase == v1alpha1.PhaseControlPlane {
		c.undoManifest(b)
	}
	if phase == v1alpha1.PhaseCluster {
		c.undoKeypair(b)
	}
	// A Cluster that stays has its OpenStackCluster deleted last, once
	// unpaused (one unpause step per phase: a step's key is its
	// identity), and the Secrets CAPO deletes with go after it.
	oscLast := phase == v1alpha1.PhaseCluster && cl != nil && !removesCluster
	c.removeCreatedIf(b, phase, func(o observed.Created) bool {
		return o.Kind != step.OpenStackCluster && (!oscLast || o.Kind != step.Secret)
	})
	// Only the first phase undone lifts the pause: the phases before it
	// stay, those after it were undone before it (and lifting it there
	// would only have the next phase's undo pause it again).
	if cl != nil && !removesCluster && first {
		b.step(!cl.Paused || !cl.ByFerry, step.Kube, step.Unpause, step.Target{Kind: step.Cluster, Name: c.name}, nil,
			"the rollback paused it; the phases it keeps go on under Cluster API")
		b.group()
	}
	if oscLast {
		c.undoOpenStackCluster(b, false)
		c.removeCreatedIf(b, phase, func(o observed.Created) bool { return o.Kind == step.Secret })
	}
}

// undoOpenStackCluster deletes the OpenStackCluster ferry created through
// CAPO, with the Cluster not paused (unpausing it first when asked) (CAPO acts on nothing of a paused
// Cluster): CAPO then deletes what it built for it (the security groups
// spec.target.securityGroups asked for, an API load balancer the plan
// asked for) and, as ferry never sets managedSubnets, no network, router
// or port it did not create. Its Machines are gone by then: the phases
// after cluster were undone first.
func (c *planCtx) undoOpenStackCluster(b *phaseBuilder, unpause bool) {
	if !c.snap.IsCreated(step.OpenStackCluster, c.name) {
		return
	}
	if cl := c.snap.Cluster; cl != nil && unpause {
		b.step(!cl.Paused || !cl.ByFerry, step.Kube, step.Unpause, step.Target{Kind: step.Cluster, Name: c.name}, nil,
			"CAPO deletes an OpenStackCluster only while its Cluster is not paused")
		b.group()
	}
	b.step(false, step.Kube, step.Delete, step.Target{Kind: step.OpenStackCluster, Name: c.name}, nil,
		"ferry created it: CAPO deletes the security groups and load balancer it built for it, and no network it did not create")
	b.group()
}

// removeReason says why removing o touches nothing outside the
// management cluster.
func removeReason(o observed.Created) string {
	switch o.Kind {
	case step.OpenStackServer, step.OpenStackMachine:
		return "bound to a server ferry did not build: removed without its finalizer, so that CAPO does not delete the server"
	case step.Secret:
		return "a copy ferry made in phase " + o.Phase + "; the original stays"
	}
	return "created by ferry in phase " + o.Phase + "; removed without its finalizers, so that no controller acts on its removal"
}

// toRelease are the cluster's Secrets and control plane that ferry did
// not create but that an object created in phase owns, or (phase
// cluster) that ferry gave the cluster-name label. An owner that goes
// would take them with it: KubeadmControlPlane makes itself the owner of
// the cluster's CA Secrets, a Cluster the owner of its control plane.
func (c *planCtx) toRelease(phase string, created []observed.Created) []step.Target {
	ownedHere := func(owners []observed.Ref) bool {
		return slices.ContainsFunc(owners, func(r observed.Ref) bool {
			return slices.ContainsFunc(created, func(o observed.Created) bool { return o.Kind == r.Kind && o.Name == r.Name })
		})
	}
	var out []step.Target
	for _, sec := range c.snap.Secrets {
		if sec.Namespace != c.ns || c.snap.IsCreated(step.Secret, sec.Name) {
			continue
		}
		if ownedHere(sec.Owners) || (phase == v1alpha1.PhaseCluster && sec.LabelledByFerry) {
			out = append(out, step.Target{Kind: step.Secret, Name: sec.Name})
		}
	}
	slices.SortFunc(out, func(a, b step.Target) int { return strings.Compare(a.Name, b.Name) })
	if cp := c.snap.ControlPlane; cp != nil && !c.snap.IsCreated(cp.Kind, cp.Name) && ownedHere(cp.Owners) {
		out = append(out, step.Target{Kind: cp.Kind, Name: cp.Name})
	}
	return out
}

// nodesToRelease are the workload Nodes that name a Machine created in
// the phase being undone (Cluster API's Machine controller annotates the
// Node of every Machine it matches), by Node name.
func (c *planCtx) nodesToRelease(created []observed.Created) []observed.Node {
	if c.snap.Workload == nil {
		return nil
	}
	var out []observed.Node
	for _, n := range c.snap.Workload.Nodes {
		if n.Machine != "" && slices.ContainsFunc(created, func(o observed.Created) bool { return o.Kind == step.Machine && o.Name == n.Machine }) {
			out = append(out, n)
		}
	}
	return out
}

// releaseNodes takes Cluster API's annotations off the Nodes of the
// Machines the phase's undo removes, while the Cluster is paused (its
// Machine controller would write them again) and before the Machines go
// (which is how the Nodes are known to be theirs).
func (c *planCtx) releaseNodes(b *phaseBuilder, created []observed.Created) {
	machines := slices.ContainsFunc(created, func(o observed.Created) bool { return o.Kind == step.Machine })
	if !machines || !c.workloadReachable(b) {
		return
	}
	for _, n := range c.nodesToRelease(created) {
		b.step(false, step.Workload, step.Release, step.Target{Kind: step.Node, Name: n.Name}, step.NewParams(step.ParamMachine, n.Machine),
			"Cluster API wrote the annotations of Machine "+n.Machine+" on it, which the rollback removes")
	}
}

// undoManifest deletes what ferry's apply of the cloud controller
// manager created; objects that were there before stay.
func (c *planCtx) undoManifest(b *phaseBuilder) {
	m := c.plan.Spec.Manifests
	if m == nil || m.CloudControllerManager == nil {
		return
	}
	if !c.workloadReachable(b) {
		return
	}
	path := m.CloudControllerManager.Path
	b.step(!c.snap.Manifest(path).Created, step.Workload, step.Delete, step.Target{Kind: step.Manifest, Name: path}, nil,
		"the objects ferry's apply created go; those that were there before stay")
	b.group()
}

// undoKeypair deletes the plan's keypair when ferry created it.
func (c *planCtx) undoKeypair(b *phaseBuilder) {
	name := c.plan.Spec.Target.SSHKey.Name
	if !slices.Contains(c.snap.Record.Keypairs, name) {
		return
	}
	if c.snap.Cloud == nil {
		if c.snap.Secret(c.ns, c.plan.Spec.Target.Identity.SecretName) == nil {
			return // nothing reaches the cloud any more: the keypair went before the identity Secret
		}
		b.block("OpenStack not observed (%s): the keypair %s ferry created cannot be looked up", c.snap.CloudError, name)
		return
	}
	b.step(!slices.Contains(c.snap.Cloud.Keypairs, name), step.OpenStack, step.Delete, step.Target{Kind: step.Keypair, Name: name},
		step.NewParams(step.ParamCredentials, c.credentialsSource()), "ferry created it for this plan")
	b.group()
}
