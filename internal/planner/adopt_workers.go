package planner

import (
	"fmt"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
)

// The adopt strategy's workers and rollout phases: each worker pool's
// running nodes taken over by a MachineDeployment, then, optionally,
// replaced by machines CAPO builds.

// adoptWorkers adopts each worker pool's running nodes into a
// MachineDeployment, a MachineSet and a Machine per node.
func adoptWorkers(c *planCtx, b *phaseBuilder) {
	_, workers, ok := c.clusterNodes(b)
	if !ok {
		return
	}
	for _, pool := range c.plan.Spec.Target.Workers {
		adoptPool(c, b, pool, poolNodes(pool, workers))
	}
}

// poolNodes picks the worker nodes a pool adopts: those its nodeSelector
// matches, or all of them when the plan has a single pool without one.
func poolNodes(pool v1alpha1.WorkerPool, workers []observed.Node) []observed.Node {
	var out []observed.Node
	for _, n := range workers {
		match := true
		for k, v := range pool.NodeSelector {
			if n.Labels[k] != v {
				match = false
			}
		}
		if match {
			out = append(out, n)
		}
	}
	return out
}

func adoptPool(c *planCtx, b *phaseBuilder, pool v1alpha1.WorkerPool, nodes []observed.Node) {
	s := c.snap
	md := c.name + "-" + pool.Name
	ms := md + "-adopted"
	if len(nodes) != pool.Replicas {
		b.block("worker pool %s has %d running nodes but the plan says replicas %d: CAPI would create or delete machines to match; set replicas to %d",
			pool.Name, len(nodes), pool.Replicas, len(nodes))
	}
	version := kubeletVersion(nodes)

	b.step(has(s.KubeadmConfigTemplates, md), step.Kube, step.Create, step.Target{Kind: step.KubeadmConfigTemplate, Name: md},
		step.NewParams(step.ParamJoinConfiguration, "from kube-system/kubeadm-config of the workload cluster", step.ParamKubeletExtraArgs, "cloud-provider=external"),
		"how new machines of pool "+pool.Name+" join")
	b.group()
	d := s.MachineDeployment(md)
	b.step(d != nil, step.Kube, step.Create, step.Target{Kind: step.MachineDeployment, Name: md},
		step.NewParams(step.ParamPaused, step.Bool(true), step.ParamReplicas, step.Int(len(nodes)), step.ParamVersion, version, step.ParamFailureDomain, pool.FailureDomain,
			step.ParamBootstrap, step.Ref(step.KubeadmConfigTemplate, md), step.ParamInfrastructureRef, step.Ref(step.OpenStackMachineTemplate, md)),
		"created paused so that it does not scale while its machines are adopted")
	b.group()
	sets := s.MachineSetsOf(md)
	b.step(len(sets) > 0, step.Kube, step.Create, step.Target{Kind: step.MachineSet, Name: ms},
		step.NewParams(step.ParamPaused, step.Bool(true), step.ParamOwner, step.Ref(step.MachineDeployment, md), step.ParamReplicas, step.Int(len(nodes)), step.ParamInfrastructureRef, step.Ref(step.OpenStackMachineTemplate, md)),
		"owned by the MachineDeployment, owning the adopted Machines")
	b.group()
	for _, n := range nodes {
		b.step(s.Machine(n.Name) != nil, step.Kube, step.Create, step.Target{Kind: step.Machine, Name: n.Name},
			step.NewParams(step.ParamPaused, step.Bool(true), step.ParamDeployment, md, step.ParamMachineSet, ms, step.ParamVersion, version,
				step.ParamInfrastructureRef, step.Ref(step.OpenStackMachine, n.Name), step.ParamProviderID, c.providerID(b, n)),
			"the Machine of running node "+n.Name)
	}
	b.group()
	poolWiring(c, b, pool, nodes)
	poolTakeover(c, b, pool, nodes)
}

// poolWiring points a pool's MachineSets and MachineDeployment at its
// machine template, and each Machine at its OpenStackMachine, bound to the
// node's running server.
func poolWiring(c *planCtx, b *phaseBuilder, pool v1alpha1.WorkerPool, nodes []observed.Node) {
	s, md := c.snap, c.name+"-"+pool.Name
	sets, d := s.MachineSetsOf(md), s.MachineDeployment(md)
	for _, set := range sets {
		b.step(set.InfrastructureRef.Kind == step.OpenStackMachineTemplate, step.Kube, step.Patch, step.Target{Kind: step.MachineSet, Name: set.Name},
			step.NewParams(step.ParamInfrastructureRef, step.Ref(step.OpenStackMachineTemplate, md)), "it refers to kind "+set.InfrastructureRef.Kind)
	}
	b.group()
	if d != nil {
		b.step(d.InfrastructureRef.Kind == step.OpenStackMachineTemplate, step.Kube, step.Patch, step.Target{Kind: step.MachineDeployment, Name: md},
			step.NewParams(step.ParamInfrastructureRef, step.Ref(step.OpenStackMachineTemplate, md)), "it refers to kind "+d.InfrastructureRef.Kind)
		b.group()
	}
	b.machineTemplate(c, md, pool.Flavor, pool.Image, "the template new machines of pool "+pool.Name+" are built from")
	b.group()
	for _, n := range nodes {
		b.openStackMachine(c, n, pool.Flavor, pool.Image)
		b.machineInfrastructure(s.Machine(n.Name))
	}
	b.group()
	c.bindServers(b, nodes)
	c.nodeProviderIDs(b, nodes)
}

// poolTakeover lifts ferry's pauses of a pool and waits for CAPI to hold
// it stable.
func poolTakeover(c *planCtx, b *phaseBuilder, pool v1alpha1.WorkerPool, nodes []observed.Node) {
	s, md := c.snap, c.name+"-"+pool.Name
	ms := md + "-adopted"
	sets, d := s.MachineSetsOf(md), s.MachineDeployment(md)
	b.unpause(step.MachineDeployment, md, d != nil, pauseOfMD(d))
	if len(sets) == 0 {
		b.unpause(step.MachineSet, ms, false, observed.Pause{})
	}
	for _, set := range sets {
		b.unpause(step.MachineSet, set.Name, true, set.Pause)
	}
	for _, n := range nodes {
		m := s.Machine(n.Name)
		b.unpause(step.Machine, n.Name, m != nil, pauseOfMachine(m))
	}
	b.group()
	b.step(d != nil && !d.Paused && d.Stable() && d.Replicas == len(nodes), step.Kube, step.Wait, step.Target{Kind: step.MachineDeployment, Name: md},
		step.NewParams(step.ParamFor, step.ForStable, step.ParamTimeout, c.waitTimeout()),
		"CAPI takes over pool "+pool.Name+" without replacing a machine")
	b.group()
}

func pauseOfMD(d *observed.MachineDeployment) observed.Pause {
	if d == nil {
		return observed.Pause{}
	}
	return d.Pause
}

// adoptRollout replaces every adopted machine with one CAPO builds, so that
// no node is left that CAPI did not create.
func adoptRollout(c *planCtx, b *phaseBuilder) {
	s := c.snap
	cp := c.plan.Spec.Target.ControlPlane
	adopted := func(match func(m *observed.Machine) bool) int {
		n := 0
		for i := range s.Machines {
			if s.Machines[i].Adopted && match(&s.Machines[i]) {
				n++
			}
		}
		return n
	}
	if cp.Provider == v1alpha1.ProviderKubeadm {
		kcp := s.ControlPlane
		left := adopted(func(m *observed.Machine) bool { return m.ControlPlane })
		b.step(left == 0 || (kcp != nil && kcp.RolloutAfter != ""), step.Kube, step.Patch, step.Target{Kind: step.KubeadmControlPlane, Name: cp.Name},
			step.NewParams(step.ParamRolloutAfter, step.RolloutNow), fmt.Sprintf("%d adopted control-plane machines to replace", left))
		b.group()
		b.step(left == 0 && kcp != nil && kcp.Stable(), step.Kube, step.Wait, step.Target{Kind: step.KubeadmControlPlane, Name: cp.Name},
			step.NewParams(step.ParamFor, step.For(step.ForNoAdopted, step.ForStable), step.ParamTimeout, c.waitTimeout()),
			"CAPI replaces the control-plane machines one at a time")
		b.group()
	}
	for _, pool := range c.plan.Spec.Target.Workers {
		md := c.name + "-" + pool.Name
		d := s.MachineDeployment(md)
		left := adopted(func(m *observed.Machine) bool { return m.Deployment == md })
		b.step(left == 0 || (d != nil && d.RolloutAfter != ""), step.Kube, step.Patch, step.Target{Kind: step.MachineDeployment, Name: md},
			step.NewParams(step.ParamRolloutAfter, step.RolloutNow), fmt.Sprintf("%d adopted machines to replace", left))
		b.group()
		b.step(left == 0 && d != nil && d.Stable(), step.Kube, step.Wait, step.Target{Kind: step.MachineDeployment, Name: md},
			step.NewParams(step.ParamFor, step.For(step.ForNoAdopted, step.ForStable), step.ParamTimeout, c.waitTimeout()),
			"CAPI replaces pool "+pool.Name+"'s machines")
		b.group()
	}
}
