package planner

import (
	"fmt"
	"strings"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
)

// The adopt strategy (seed 000): the running nodes stay, and CAPI's objects
// are rebuilt around them with OpenStack infrastructure kinds, created
// paused, wired together, then unpaused. Objects are created with their
// final references; the patch steps are for objects that already exist
// with another provider's kinds (restored from the old management cluster).

// adoptCluster: the Secrets, the Cluster and its OpenStackCluster.
func adoptCluster(c *planCtx, b *phaseBuilder) {
	s := c.snap
	from := ""
	if c.plan.Spec.Adopt != nil {
		from = c.plan.Spec.Adopt.SecretsFrom
	}
	suffixes := observed.AdoptSecrets
	if s.Workload != nil && s.Workload.ExternalEtcd {
		suffixes = observed.SecretSuffixes
	}
	for _, suffix := range suffixes {
		if (suffix == "proxy" || suffix == observed.ExternalEtcdSecret) && c.plan.Spec.Target.ControlPlane.Provider == v1alpha1.ProviderKamaji {
			continue // Kamaji keeps the certificates of its hosted control plane itself
		}
		name := c.name + "-" + suffix
		if sec := s.Secret(c.ns, name); sec != nil {
			// Cluster API's managers cache only the Secrets with the
			// cluster's label: one they cannot see, they create again.
			b.step(sec.Cluster == c.name, step.Kube, step.Label, step.Target{Kind: step.Secret, Name: name},
				step.NewParams("cluster.x-k8s.io/cluster-name", c.name), "Cluster API's managers see only the Secrets that carry the cluster's label")
			continue
		}
		switch {
		case from == "":
			b.block("Secret %s/%s is missing and ferry never generates it (a new one would cut off the running nodes): restore it, or name a namespace with a copy in spec.adopt.secretsFrom", c.ns, name)
		case s.Secret(from, name) == nil:
			b.block("Secret %s/%s is missing, and so is its copy %s/%s", c.ns, name, from, name)
		}
		b.step(false, step.Kube, step.CopySecret, step.Target{Kind: step.Secret, Name: name},
			step.NewParams(step.ParamFrom, step.NamespacedName(from, name)), "taken over from the running cluster, never regenerated")
	}
	b.group()
	b.identitySecret(c)
	b.group()
	ensureKeypair(c, b)
	b.group()

	cl := s.Cluster
	osc := step.Target{Kind: step.OpenStackCluster, Name: c.name}
	wired := cl != nil && cl.InfrastructureRef == observed.Ref{Kind: step.OpenStackCluster, Name: c.name}
	if cl == nil {
		b.step(false, step.Kube, step.Create, step.Target{Kind: step.Cluster, Name: c.name},
			step.NewParams(step.ParamPaused, step.Bool(true), step.ParamInfrastructureRef, step.Ref(osc.Kind, osc.Name),
				step.ParamControlPlaneRef, step.Ref(c.plan.Spec.Target.ControlPlane.Provider, c.plan.Spec.Target.ControlPlane.Name),
				step.ParamControlPlaneEndpoint, "from the "+c.name+"-kubeconfig Secret"),
			"created paused so that CAPI does not act before its infrastructure exists")
	} else {
		b.step(wired, step.Kube, step.Patch, step.Target{Kind: step.Cluster, Name: c.name},
			step.NewParams(step.ParamPaused, step.Bool(true), step.ParamInfrastructureRef, step.Ref(osc.Kind, osc.Name)),
			fmt.Sprintf("infrastructureRef is %s/%s; paused while it is switched", cl.InfrastructureRef.Kind, cl.InfrastructureRef.Name))
	}
	b.group()
	b.openStackCluster(c)
	b.group()
	b.unpause(step.Cluster, c.name, wired, pauseOf(cl))
	b.group()
	b.waitOpenStackCluster(c)
}

func pauseOf(cl *observed.Cluster) observed.Pause {
	if cl == nil {
		return observed.Pause{}
	}
	return cl.Pause
}

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
