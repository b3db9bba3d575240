package planner

import (
	"fmt"
	"strings"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/observed"
)

// healthChecks blocks the phase about to run when the cluster is not in a
// state to start it (seed 001's known issues). Each phase checks what the
// phases before it left behind, not the objects it changes and waits on
// itself: those are its own wait steps.
func healthChecks(c *planCtx, b *phaseBuilder, phase string) {
	kubeadm := c.plan.Spec.Target.ControlPlane.Provider == v1alpha1.ProviderKubeadm
	adopt := c.plan.Spec.Strategy == v1alpha1.StrategyAdopt
	switch {
	case adopt && phase == v1alpha1.PhaseControlPlane && kubeadm:
		c.checkNodesReady(b, func(n observed.Node) bool { return n.ControlPlane })
	case adopt && phase == v1alpha1.PhaseWorkers:
		c.checkOpenStackCluster(b)
		c.checkControlPlane(b)
		c.checkNodesReady(b, func(n observed.Node) bool { return !n.ControlPlane })
	case adopt && phase == v1alpha1.PhaseRollout:
		c.checkControlPlane(b)
		c.checkPools(b, c.newPools())
		c.checkNodesReady(b, func(observed.Node) bool { return true })
	case phase == v1alpha1.PhasePrepare:
		c.checkControlPlane(b)
		c.checkPools(b, c.plan.Spec.Replace.OldMachineDeployments)
	case !adopt && phase == v1alpha1.PhaseWorkers:
		c.checkOpenStackCluster(b)
		c.checkControlPlane(b)
	case phase == v1alpha1.PhaseCutover:
		c.checkControlPlane(b)
		c.checkPools(b, c.newPools())
		c.checkOverlay(b)
	case phase == v1alpha1.PhaseCleanup:
		c.checkControlPlane(b)
		c.checkPools(b, c.newPools())
	}
}

// checkOverlay: a VPN overlay manifest whose workloads are not available,
// on old nodes or on new ones that joined since network-bridge waited.
func (c *planCtx) checkOverlay(b *phaseBuilder) {
	for _, p := range c.overlay() {
		if !c.snap.Manifest(p).Healthy {
			b.block("VPN overlay %s is not healthy (its DaemonSets or Deployments are short of available pods): no workload moves before every node is on the overlay", p)
		}
	}
}

func (c *planCtx) newPools() []string {
	var out []string
	for _, w := range c.plan.Spec.Target.Workers {
		out = append(out, c.name+"-"+w.Name)
	}
	return out
}

func (c *planCtx) checkOpenStackCluster(b *phaseBuilder) {
	if osc := c.snap.OpenStackCluster; osc == nil || !osc.Ready {
		b.block("OpenStackCluster %s/%s is not ready", c.ns, c.name)
	}
}

// checkControlPlane: a KubeadmControlPlane that still rolls out, or whose
// replicas disagree with the control-plane nodes (the hang of seed 001,
// after a scale-down and scale-up), or a Kamaji control plane not ready.
func (c *planCtx) checkControlPlane(b *phaseBuilder) {
	cp := c.snap.ControlPlane
	if cp == nil || cp.Paused {
		return
	}
	if cp.Kind == v1alpha1.ProviderKamaji {
		if !cp.Ready {
			b.block("KamajiControlPlane %s is not ready", cp.Name)
		}
		return
	}
	if !cp.Stable() {
		b.block("KubeadmControlPlane %s is still rolling out (%s)", cp.Name, replicaCounts(cp.Replicas, cp.ReadyReplicas, cp.UpdatedReplicas, cp.UnavailableReplicas))
	}
	if c.snap.Workload == nil {
		return
	}
	nodes := 0
	for _, n := range c.snap.Workload.Nodes {
		if n.ControlPlane {
			nodes++
		}
	}
	if nodes != cp.Replicas {
		b.block("KubeadmControlPlane %s has replicas %d but the workload cluster has %d control-plane nodes (seed 001: a scale-up after a scale-down hangs like this); fix the control plane first",
			cp.Name, cp.Replicas, nodes)
	}
}

// checkPools: MachineDeployments that still roll out, and their Machines
// that have no node.
func (c *planCtx) checkPools(b *phaseBuilder, names []string) {
	for _, name := range names {
		d := c.snap.MachineDeployment(name)
		if d == nil {
			continue
		}
		if !d.Paused && !d.Stable() {
			b.block("MachineDeployment %s is still rolling out (%s)", name, replicaCounts(d.Replicas, d.ReadyReplicas, d.UpdatedReplicas, d.UnavailableReplicas))
		}
		var noNode []string
		for _, m := range c.snap.MachinesOf(name) {
			if m.NodeRef == "" && !m.Paused {
				noNode = append(noNode, m.Name)
			}
		}
		if len(noNode) > 0 {
			b.block("Machines without a node in MachineDeployment %s: %s", name, strings.Join(noNode, ", "))
		}
	}
}

func (c *planCtx) checkNodesReady(b *phaseBuilder, match func(observed.Node) bool) {
	if c.snap.Workload == nil {
		return
	}
	var notReady []string
	for _, n := range c.snap.Workload.Nodes {
		if match(n) && !n.Ready {
			notReady = append(notReady, n.Name)
		}
	}
	if len(notReady) > 0 {
		b.block("nodes NotReady: %s", strings.Join(notReady, ", "))
	}
}

func replicaCounts(replicas, ready, updated, unavailable int) string {
	return fmt.Sprintf("replicas %d, ready %d, updated %d, unavailable %d", replicas, ready, updated, unavailable)
}
