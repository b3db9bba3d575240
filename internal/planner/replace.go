package planner

import (
	"sort"
	"strings"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
)

// The replace strategy (seed 003): new machines in OpenStack, a VPN overlay
// while the workload moves, the old nodes drained one at a time, and the
// old machines removed at the end.

// replacePrepare: stop the old pools from scaling and check the cloud.
func replacePrepare(c *planCtx, b *phaseBuilder) {
	s := c.snap
	// Once cleanup is approved, an old pool that is gone, or going, was
	// deleted by it: nothing to pause (a pause would stop CAPI from
	// finishing the deletion). Before, a pool the plan names must exist.
	cleaning := c.plan.PhaseIndex(c.plan.Spec.Approve) >= c.plan.PhaseIndex(v1alpha1.PhaseCleanup)
	for _, md := range c.plan.Spec.Replace.OldMachineDeployments {
		d := s.MachineDeployment(md)
		if d == nil && !cleaning {
			b.block("old MachineDeployment %s/%s named in spec.replace.oldMachineDeployments not found", c.ns, md)
		}
		deleted := cleaning && (d == nil || d.Deleting)
		b.step(deleted || (d != nil && d.Paused), step.Kube, step.Pause, step.Target{Kind: step.MachineDeployment, Name: md}, nil,
			"no scaling of the old pool while the move runs")
	}
	b.group()
	preflight(c, b)
	b.group()
	ensureKeypair(c, b)
}

// preflight resolves every name the plan gives to an OpenStack ID and checks
// that the quota covers the new machines.
func preflight(c *planCtx, b *phaseBuilder) {
	names := c.cloudNames()
	cloud := c.snap.Cloud
	resolved := cloud != nil
	for _, key := range names {
		if !resolved {
			break
		}
		r, ok := cloud.Resolved[key]
		switch {
		case !ok:
			resolved = false
		case r.Error != "":
			resolved = false
			b.block("OpenStack %s: %s", key, r.Error)
		}
	}
	b.stepWith(step.Inputs{CloudNames: c.plan.CloudNames()}, resolved, step.OpenStack, step.Resolve, step.Target{Kind: step.Cloud, Name: c.plan.Spec.Target.Identity.CloudName},
		step.NewParams(step.ParamNames, strings.Join(names, ","), step.ParamCredentials, c.credentialsSource()),
		"credentials work and every flavor, image and network the plan names exists")
	if cloud != nil && cloud.QuotaShortfall != "" {
		b.block("OpenStack quota does not cover the new machines: %s", cloud.QuotaShortfall)
	}
	machines := 0
	for _, w := range c.plan.Spec.Target.Workers {
		machines += w.Replicas
	}
	b.stepWith(step.Inputs{Machines: c.plan.NewMachines()}, resolved && cloud.QuotaShortfall == "", step.OpenStack, step.CheckQuota, step.Target{Kind: step.Cloud, Name: c.plan.Spec.Target.Identity.CloudName},
		step.NewParams(step.ParamMachines, step.Int(machines), step.ParamCredentials, c.credentialsSource()),
		"instances, cores and RAM for the new machines")
}

// cloudNames lists the "<kind>/<name>" keys of the OpenStack resources the
// plan names, sorted.
func (c *planCtx) cloudNames() []string {
	var keys []string
	for _, n := range c.plan.CloudNames() {
		keys = append(keys, n.Key())
	}
	return keys
}

// credentialsSource names the Secret the openstack executor authenticates
// with: the identity Secret, or its source while it is not yet filled.
func (c *planCtx) credentialsSource() string {
	id := c.plan.Spec.Target.Identity
	if c.snap.HasSecretKey(c.ns, id.SecretName, "clouds.yaml") || id.From == nil {
		return step.NamespacedName(c.ns, id.SecretName)
	}
	return step.NamespacedName(id.From.Namespace, id.From.Name)
}

// ensureKeypair adds the step that creates the plan's SSH keypair in Nova
// (seed 000's manual step).
func ensureKeypair(c *planCtx, b *phaseBuilder) {
	key := c.plan.Spec.Target.SSHKey
	cloud := c.snap.Cloud
	exists := cloud != nil && has(cloud.Keypairs, key.Name)
	if cloud != nil && !exists && key.PublicKey == "" {
		b.block("keypair %s does not exist in OpenStack and spec.target.sshKey.publicKey is empty, so ferry cannot create it", key.Name)
	}
	b.stepWith(step.Inputs{PublicKey: key.PublicKey}, exists, step.OpenStack, step.EnsureKeypair, step.Target{Kind: step.Keypair, Name: key.Name},
		step.NewParams(step.ParamPublicKey, publicKeyParam(key.PublicKey), step.ParamCredentials, c.credentialsSource()),
		"the machines are created with it")
}

// publicKeyParam shortens a public key for display: its type and comment.
func publicKeyParam(key string) string {
	if key == "" {
		return ""
	}
	f := strings.Fields(key)
	if len(f) >= 3 {
		return f[0] + " ... " + f[2]
	}
	return f[0] + " ..."
}

// replaceNetworkBridge builds the gateway (seed 002), then applies the VPN
// overlay and waits for it (seed 003). The wait is done for good once the
// infrastructure phase has switched the Cluster: the workers phase then
// adds nodes, and the overlay's DaemonSets are short of pods until theirs
// start. Cutover's health check guards the overlay from then on.
func replaceNetworkBridge(c *planCtx, b *phaseBuilder) {
	gatewayBridge(c, b)
	paths := c.overlay()
	for _, p := range paths {
		b.step(c.snap.Manifest(p).Applied, step.Workload, step.Apply, step.Target{Kind: step.Manifest, Name: p}, nil,
			"old and new nodes reach each other over the overlay while the workload moves")
	}
	b.group()
	switched := c.switched()
	for _, p := range paths {
		b.step(switched || c.snap.Manifest(p).Healthy, step.Workload, step.Wait, step.Target{Kind: step.Manifest, Name: p},
			step.NewParams(step.ParamFor, step.ForWorkloads, step.ParamTimeout, c.waitTimeout()), "the overlay is up before any workload moves")
	}
}

// overlay lists the VPN overlay's manifests (none with a gateway alone).
func (c *planCtx) overlay() []string {
	if m := c.plan.Spec.Manifests; m != nil {
		return m.VPNOverlay
	}
	return nil
}

// switched reports whether the Cluster's infrastructure is OpenStack.
func (c *planCtx) switched() bool {
	cl := c.snap.Cluster
	return cl != nil && cl.InfrastructureRef == observed.Ref{Kind: step.OpenStackCluster, Name: c.name}
}

// replaceInfrastructure switches the Cluster's infrastructure to OpenStack.
func replaceInfrastructure(c *planCtx, b *phaseBuilder) {
	s := c.snap
	cl := s.Cluster
	if cl == nil {
		b.block("Cluster %s/%s not found: replace moves an existing cluster", c.ns, c.name)
	}
	wired := c.switched()
	b.step(wired || (cl != nil && cl.Paused), step.Kube, step.Pause, step.Target{Kind: step.Cluster, Name: c.name}, nil,
		"no reconciliation while the infrastructure is switched")
	b.group()
	b.identitySecret(c)
	b.group()
	b.openStackCluster(c)
	b.group()
	from := ""
	if cl != nil {
		from = "it refers to " + step.Ref(cl.InfrastructureRef.Kind, cl.InfrastructureRef.Name)
	}
	b.step(wired, step.Kube, step.Patch, step.Target{Kind: step.Cluster, Name: c.name},
		step.NewParams(step.ParamInfrastructureRef, step.Ref(step.OpenStackCluster, c.name)), from)
	b.group()
	b.unpause(step.Cluster, c.name, wired, pauseOf(cl))
	b.group()
	b.waitOpenStackCluster(c)
	b.group()

	cp := c.plan.Spec.Target.ControlPlane
	if cp.Provider == v1alpha1.ProviderKubeadm {
		kcp := s.ControlPlane
		b.machineTemplate(c, cp.Name, cp.Flavor, cp.Image, "the template of the new control-plane machines")
		b.group()
		refOK := kcp != nil && kcp.InfrastructureRef == observed.Ref{Kind: step.OpenStackMachineTemplate, Name: cp.Name}
		b.step(refOK, step.Kube, step.Patch, step.Target{Kind: step.KubeadmControlPlane, Name: cp.Name},
			step.NewParams(step.ParamMachineTemplateInfraRef, step.Ref(step.OpenStackMachineTemplate, cp.Name)),
			"CAPI rolls the control plane onto OpenStack machines, one at a time")
		b.group()
		b.step(refOK && kcp.Stable() && c.controlPlaneOnOpenStack(), step.Kube, step.Wait, step.Target{Kind: step.KubeadmControlPlane, Name: cp.Name},
			step.NewParams(step.ParamFor, step.For(step.ForOnOpenStack, step.ForStable), step.ParamTimeout, c.waitTimeout()),
			"the control plane runs on OpenStack")
		b.group()
	}
	b.cloudControllerManager(c, "OpenStack's cloud controller manager initialises the new nodes and load balancers")
}

func (c *planCtx) controlPlaneOnOpenStack() bool {
	for _, m := range c.snap.Machines {
		if m.ControlPlane && !strings.HasPrefix(m.ProviderID, step.ProviderIDPrefix) {
			return false
		}
	}
	return true
}

// replaceWorkers creates the new worker pools and waits for their nodes.
func replaceWorkers(c *planCtx, b *phaseBuilder) {
	s := c.snap
	t := c.plan.Spec.Target
	for _, pool := range t.Workers {
		md := c.name + "-" + pool.Name
		b.machineTemplate(c, md, pool.Flavor, pool.Image, "the template of pool "+pool.Name)
		b.step(has(s.KubeadmConfigTemplates, md), step.Kube, step.Create, step.Target{Kind: step.KubeadmConfigTemplate, Name: md},
			step.NewParams(step.ParamKubeletExtraArgs, "cloud-provider=external"), "how the machines of pool "+pool.Name+" join")
	}
	b.group()
	for _, pool := range t.Workers {
		md := c.name + "-" + pool.Name
		b.step(s.MachineDeployment(md) != nil, step.Kube, step.Create, step.Target{Kind: step.MachineDeployment, Name: md},
			step.NewParams(step.ParamReplicas, step.Int(pool.Replicas), step.ParamFailureDomain, pool.FailureDomain,
				step.ParamBootstrap, step.Ref(step.KubeadmConfigTemplate, md), step.ParamInfrastructureRef, step.Ref(step.OpenStackMachineTemplate, md)),
			"new machines in OpenStack")
	}
	b.group()
	for _, pool := range t.Workers {
		md := c.name + "-" + pool.Name
		d := s.MachineDeployment(md)
		b.step(d != nil && d.Stable() && d.Replicas == pool.Replicas && c.nodesReady(md), step.Kube, step.Wait, step.Target{Kind: step.MachineDeployment, Name: md},
			step.NewParams(step.ParamFor, step.For(step.ForStable, step.ForNodesReady), step.ParamTimeout, c.waitTimeout()),
			"the new nodes are Ready in the workload cluster")
	}
}

// nodesReady reports whether every Machine of a MachineDeployment has a
// node and every such node is Ready.
func (c *planCtx) nodesReady(md string) bool {
	for _, m := range c.snap.MachinesOf(md) {
		n := c.snap.Node(m.NodeRef)
		if m.NodeRef == "" || n == nil || !n.Ready {
			return false
		}
	}
	return true
}

// oldNodes are the nodes of the old pools, sorted: the nodes of their
// Machines, and worker nodes not on OpenStack whose Machine (the one
// Cluster API wrote on the node) is gone, as the old pool's are once
// cleanup deleted it. A node no Machine ever matched (one joined by hand,
// an edge node) or one of a pool the plan does not name is not the
// migration's: it is never cordoned, drained or deleted.
func (c *planCtx) oldNodes() []string {
	set := map[string]bool{}
	for _, md := range c.plan.Spec.Replace.OldMachineDeployments {
		for _, m := range c.snap.MachinesOf(md) {
			if m.NodeRef != "" {
				set[m.NodeRef] = true
			}
		}
	}
	if c.snap.Workload != nil {
		for _, n := range c.snap.Workload.Nodes {
			if !n.ControlPlane && !strings.HasPrefix(n.ProviderID, step.ProviderIDPrefix) && n.Machine != "" && c.snap.Machine(n.Machine) == nil {
				set[n.Name] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// replaceCutover empties the old nodes one at a time, probing the
// application between them, then waits for the DNS switch to be approved.
func replaceCutover(c *planCtx, b *phaseBuilder) {
	if _, _, ok := c.clusterNodes(b); !ok {
		return
	}
	cut := c.plan.Spec.Cutover
	if lb := cut.LoadBalancerService; lb != nil {
		key := lb.Namespace + "/" + lb.Name
		b.step(c.snap.Workload.LoadBalancers[key] != "", step.Workload, step.Wait, step.Target{Kind: step.Service, Namespace: lb.Namespace, Name: lb.Name},
			step.NewParams(step.ParamFor, step.ForAddress, step.ParamTimeout, c.waitTimeout()),
			"the new cloud's load balancer serves before any node is drained")
		b.group()
	}
	for _, name := range c.oldNodes() {
		n := c.snap.Node(name)
		gone := n == nil
		b.step(gone || n.Unschedulable, step.Workload, step.Cordon, step.Target{Kind: step.Node, Name: name}, nil, "no new pods on the old node")
		b.group()
		b.step(gone || (n.Unschedulable && n.PodsToEvict == 0), step.Workload, step.Drain, step.Target{Kind: step.Node, Name: name},
			c.drainParams(), "its pods move to the new nodes")
		b.group()
		if cut.ProbeURL != "" {
			node := step.Target{Kind: step.Node, Name: name}
			b.step(gone || c.snap.Checked(b.key(step.Probe, node)), step.Workload, step.Probe, node,
				step.NewParams(step.ParamURL, cut.ProbeURL, step.ParamExpect, step.Expect2xx),
				"the application still answers before the next node")
			b.group()
		}
	}
	approvedCleanup := c.plan.PhaseIndex(c.plan.Spec.Approve) >= c.plan.PhaseIndex(v1alpha1.PhaseCleanup)
	b.step(approvedCleanup, step.Approval, step.AwaitApproval, step.Target{Kind: step.MigrationPlan, Name: c.plan.Metadata.Name}, nil,
		"switch DNS to the new load balancer (outside ferry), then approve cleanup")
}

// replaceCleanup removes what the plan names of the old cloud, and what
// ferry created for the move.
func replaceCleanup(c *planCtx, b *phaseBuilder) {
	s := c.snap
	for _, md := range c.plan.Spec.Replace.OldMachineDeployments {
		b.step(s.MachineDeployment(md) == nil, step.Kube, step.Delete, step.Target{Kind: step.MachineDeployment, Name: md}, nil,
			"the old pool named in spec.replace.oldMachineDeployments, and its machines")
	}
	b.group()
	if _, _, ok := c.clusterNodes(b); ok {
		for _, name := range c.oldNodes() {
			b.step(s.Node(name) == nil, step.Workload, step.Delete, step.Target{Kind: step.Node, Name: name}, nil,
				"its machine is gone; the Node object is left over")
		}
	}
	b.group()
	gatewayCleanup(c, b)
	cloud := s.Cloud
	tagged := ""
	if cloud != nil {
		tagged = strings.Join(cloud.Tagged, ",")
	}
	b.step(cloud != nil && len(cloud.Tagged) == 0, step.OpenStack, step.Delete, step.Target{Kind: step.TaggedResources, Name: "ferry-plan=" + c.plan.Metadata.Name},
		step.NewParams(step.ParamResources, tagged, step.ParamCredentials, c.credentialsSource()),
		"only what ferry created for this migration (VPN gateway, temporary rules)")
}
