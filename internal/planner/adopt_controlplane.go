package planner

import (
	"fmt"
	"strings"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
)

// The adopt strategy's control-plane phase: a KubeadmControlPlane built
// around the running control-plane nodes, or a running Kamaji control
// plane wired to the cluster.

// adoptControlPlane dispatches on the control-plane provider.
func adoptControlPlane(c *planCtx, b *phaseBuilder) {
	if c.plan.Spec.Target.ControlPlane.Provider == v1alpha1.ProviderKamaji {
		adoptKamaji(c, b)
		return
	}
	adoptKubeadm(c, b)
}

// adoptKubeadm builds a KubeadmControlPlane, its Machines and
// OpenStackMachines around the running control-plane nodes.
func adoptKubeadm(c *planCtx, b *phaseBuilder) {
	cpNodes, ok := kubeadmNodes(c, b)
	if !ok {
		return
	}
	version := controlPlaneVersion(c.snap, cpNodes)
	kubeadmObjects(c, b, cpNodes, version)
	kubeadmWiring(c, b, cpNodes)
	s, cp, kcp := c.snap, c.plan.Spec.Target.ControlPlane, c.snap.ControlPlane
	for _, n := range cpNodes {
		m := s.Machine(n.Name)
		b.unpause(step.Machine, n.Name, m != nil, pauseOfMachine(m))
	}
	var kcpPause observed.Pause
	if kcp != nil {
		kcpPause = kcp.Pause
	}
	b.unpause(step.KubeadmControlPlane, cp.Name, kcp != nil, kcpPause)
	b.group()
	// The wait trusts the KCP's own status; whether its replicas match the
	// nodes is the next phase's health check (seed 001's hang shows as a
	// stable KCP with fewer nodes than replicas).
	b.step(kcp != nil && !kcp.Paused && kcp.Stable(), step.Kube, step.Wait, step.Target{Kind: step.KubeadmControlPlane, Name: cp.Name},
		step.NewParams(step.ParamFor, step.For(step.ForStable, step.ForAvailable), step.ParamTimeout, c.waitTimeout()),
		"CAPI takes over the control plane without replacing a machine")
	b.group()
	b.cloudControllerManager(c, "seed 000's manual step once the first control-plane machine is adopted")
}

// kubeadmNodes are the control-plane nodes to adopt; ok is false when
// there are none to build a KubeadmControlPlane around. Other reasons
// not to go on block the phase but still list its steps.
func kubeadmNodes(c *planCtx, b *phaseBuilder) (cpNodes []observed.Node, ok bool) {
	s := c.snap
	cpNodes, _, ok = c.clusterNodes(b)
	if !ok {
		return nil, false
	}
	if len(cpNodes) == 0 {
		b.block("the workload cluster has no control-plane nodes (label node-role.kubernetes.io/control-plane) to adopt")
		return nil, false
	}
	if !s.Workload.KubeadmConfig {
		b.block("ConfigMap kube-system/kubeadm-config is missing in the workload cluster: the running kubeadm spec cannot be recovered")
	}
	if s.ControlPlane == nil && len(cpNodes)%2 == 0 && !s.Workload.ExternalEtcd {
		b.block("the workload cluster has %d control-plane nodes with stacked etcd: a KubeadmControlPlane must have an odd number of replicas then (an even etcd membership has no majority to spare); scale the control plane to an odd number first", len(cpNodes))
	}
	if kcp := s.ControlPlane; kcp != nil && kcp.Kind != step.KubeadmControlPlane {
		b.block("the cluster's control plane %s/%s is not a KubeadmControlPlane, but the plan says KubeadmControlPlane", kcp.Kind, kcp.Name)
	}
	return cpNodes, true
}

// controlPlaneVersion is kubeadm's version, which kube-proxy's image
// carries: KubeadmControlPlane sets kube-proxy's image to its version on
// every pass, and rolls out machines of another version. Kubelets may lag
// behind it.
func controlPlaneVersion(s *observed.Snapshot, cpNodes []observed.Node) string {
	version := s.Workload.KubernetesVersion
	if version == "" {
		version = kubeletVersion(cpNodes)
	}
	if version != "" && !strings.HasPrefix(version, "v") {
		version = "v" + version // KubeadmControlPlane compares versions as strings
	}
	return version
}

// kubeadmSpec stands for the running kubeadm spec, which the executor reads.
const kubeadmSpec = "from kube-system/kubeadm-config of the workload cluster"

// kubeadmObjects creates the KubeadmConfigs, the KubeadmControlPlane, the
// Machines and the machine template of the control plane.
func kubeadmObjects(c *planCtx, b *phaseBuilder, cpNodes []observed.Node, version string) {
	s, cp := c.snap, c.plan.Spec.Target.ControlPlane
	for _, n := range cpNodes {
		b.step(has(s.KubeadmConfigs, n.Name), step.Kube, step.Create, step.Target{Kind: step.KubeadmConfig, Name: n.Name},
			step.NewParams(step.ParamSpec, kubeadmSpec), "the bootstrap config the running node was joined with")
	}
	b.group()
	b.step(s.ControlPlane != nil, step.Kube, step.Create, step.Target{Kind: step.KubeadmControlPlane, Name: cp.Name},
		step.NewParams(step.ParamPaused, step.Bool(true), step.ParamReplicas, step.Int(len(cpNodes)), step.ParamVersion, version,
			step.ParamKubeadmConfigSpec, kubeadmSpec, step.ParamMachineTemplateInfraRef, step.Ref(step.OpenStackMachineTemplate, cp.Name)),
		"created paused, with the running kubeadm spec and version, so that nothing rolls")
	b.group()
	for _, n := range cpNodes {
		b.step(s.Machine(n.Name) != nil, step.Kube, step.Create, step.Target{Kind: step.Machine, Name: n.Name},
			step.NewParams(step.ParamPaused, step.Bool(true), step.ParamControlPlane, step.Bool(true), step.ParamVersion, version,
				step.ParamBootstrap, step.Ref(step.KubeadmConfig, n.Name), step.ParamInfrastructureRef, step.Ref(step.OpenStackMachine, n.Name),
				step.ParamProviderID, c.providerID(b, n)),
			"the Machine of running node "+n.Name)
	}
	b.group()
	b.machineTemplate(c, cp.Name, cp.Flavor, cp.Image, "the template new control-plane machines are built from")
	b.group()
}

// kubeadmWiring points the KubeadmControlPlane at the template and each
// Machine at its OpenStackMachine, bound to the node's running server.
func kubeadmWiring(c *planCtx, b *phaseBuilder, cpNodes []observed.Node) {
	s, cp, kcp := c.snap, c.plan.Spec.Target.ControlPlane, c.snap.ControlPlane
	if kcp != nil {
		b.step(kcp.InfrastructureRef == observed.Ref{Kind: step.OpenStackMachineTemplate, Name: cp.Name}, step.Kube, step.Patch, step.Target{Kind: step.KubeadmControlPlane, Name: cp.Name},
			step.NewParams(step.ParamMachineTemplateInfraRef, step.Ref(step.OpenStackMachineTemplate, cp.Name)),
			fmt.Sprintf("it refers to %s/%s", kcp.InfrastructureRef.Kind, kcp.InfrastructureRef.Name))
		b.group()
	}
	for _, n := range cpNodes {
		b.openStackMachine(c, n, cp.Flavor, cp.Image)
	}
	b.group()
	for _, n := range cpNodes {
		b.machineInfrastructure(s.Machine(n.Name))
	}
	b.group()
	c.bindServers(b, cpNodes)
	c.nodeProviderIDs(b, cpNodes)
}

func pauseOfMachine(m *observed.Machine) observed.Pause {
	if m == nil {
		return observed.Pause{}
	}
	return m.Pause
}

// adoptKamaji wires a running KamajiControlPlane to the cluster (seed 004).
// There are no control-plane machines: Kamaji serves the API from the
// management cluster.
func adoptKamaji(c *planCtx, b *phaseBuilder) {
	s := c.snap
	cp := c.plan.Spec.Target.ControlPlane
	kcp := s.ControlPlane
	if kcp == nil || kcp.Kind != step.KamajiControlPlane {
		b.block("KamajiControlPlane %s/%s not found: ferry adopts a running Kamaji control plane and does not create one", c.ns, cp.Name)
	}
	want := cp.Kubelet.PreferredAddressTypes
	b.step(kcp != nil && equalStrings(kcp.PreferredAddressTypes, want), step.Kube, step.Patch, step.Target{Kind: step.KamajiControlPlane, Name: cp.Name},
		step.NewParams(step.ParamPreferredAddressTypes, joinComma(want)),
		"the hosted API server reaches kubelets by IP: node names do not resolve there")
	b.group()
	cl := s.Cluster
	b.step(cl != nil && cl.ControlPlaneRef == observed.Ref{Kind: step.KamajiControlPlane, Name: cp.Name}, step.Kube, step.Patch, step.Target{Kind: step.Cluster, Name: c.name},
		step.NewParams(step.ParamControlPlaneRef, step.Ref(step.KamajiControlPlane, cp.Name)), "the Cluster's control plane is the Kamaji one")
	b.group()
	b.step(kcp != nil && kcp.Ready, step.Kube, step.Wait, step.Target{Kind: step.KamajiControlPlane, Name: cp.Name},
		step.NewParams(step.ParamFor, step.ForReady, step.ParamTimeout, c.waitTimeout()), "Kamaji serves the control plane at its endpoint")
	b.group()
	b.cloudControllerManager(c, "with no control-plane nodes, the cloud controller manager runs on the workers (seed 004)")
}
