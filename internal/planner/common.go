package planner

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
)

func has(list []string, name string) bool { return slices.Contains(list, name) }

// resource renders a ResourceRef as name=x or id=y.
func resource(r *v1alpha1.ResourceRef) string {
	if r == nil {
		return ""
	}
	if r.ID != "" {
		return step.Resource(true, r.ID)
	}
	return step.Resource(false, r.Name)
}

func (c *planCtx) waitTimeout() string { return c.plan.Spec.Timeouts.Wait }

// drainParams are a drain step's parameters: the plan's
// spec.cutover.drainTimeout (validated, and defaulted, before the plan gets
// here) is the step's timeout, so that the executor reads it from the step
// and never from the plan.
func (c *planCtx) drainParams() step.Params {
	return step.NewParams(step.ParamTimeout, c.plan.Spec.Cutover.DrainTimeout,
		step.ParamRespect, step.RespectDisruptionBudgets, step.ParamIgnore, step.IgnoreDaemonSets)
}

func (c *planCtx) identityRef() string {
	id := c.plan.Spec.Target.Identity
	return step.IdentityRef(id.SecretName, id.CloudName)
}

// clusterNodes splits the workload's nodes into control-plane and worker
// nodes, sorted by name; ok is false (and the phase blocked) when the
// workload cluster was not observed.
func (c *planCtx) clusterNodes(b *phaseBuilder) (cp, workers []observed.Node, ok bool) {
	if c.snap.Workload == nil {
		reason := c.snap.WorkloadError
		if reason == "" {
			reason = "not observed"
		}
		b.block("workload cluster %s unreachable (%s): its nodes decide the steps", c.name, reason)
		return nil, nil, false
	}
	for _, n := range c.snap.Workload.Nodes {
		if n.ControlPlane {
			cp = append(cp, n)
		} else {
			workers = append(workers, n)
		}
	}
	byName := func(s []observed.Node) {
		sort.Slice(s, func(i, j int) bool { return s[i].Name < s[j].Name })
	}
	byName(cp)
	byName(workers)
	return cp, workers, true
}

// providerID is the provider ID an adopted node's Machine gets: the node's
// own when it is an OpenStack one, else its Nova server's by name, else
// left to the executor to look up when the cloud was not asked.
func (c *planCtx) providerID(b *phaseBuilder, n observed.Node) string {
	if strings.HasPrefix(n.ProviderID, step.ProviderIDPrefix) {
		return n.ProviderID
	}
	if cloud := c.snap.Cloud; cloud != nil {
		if id, ok := cloud.Servers[n.Name]; ok {
			return step.ProviderIDPrefix + id
		}
		b.block("node %s has no Nova server of the same name: ferry cannot tell which server to adopt", n.Name)
		return ""
	}
	return step.ProviderIDLookup
}

// bindServers records each node's running server in the OpenStackServer
// that CAPO's OpenStackMachine of the node reconciles through: CAPO then
// finds the server by ID and adopts its ports, where otherwise it would
// look it up by name and first create a port that nothing attaches.
func (c *planCtx) bindServers(b *phaseBuilder, nodes []observed.Node) {
	for _, n := range nodes {
		if n.Name == c.name+"-bastion" {
			// CAPO deletes the OpenStackServer <cluster>-bastion, and its
			// server, whenever the cluster has no bastion.
			b.block("node %s has the name CAPO gives the cluster's bastion: CAPO would delete its server as a bastion the cluster does not want", n.Name)
			continue
		}
		b.step(has(c.snap.BoundServers, n.Name), step.OpenStack, step.Bind, step.Target{Kind: step.OpenStackServer, Name: n.Name},
			step.NewParams(step.ParamProviderID, c.providerID(b, n), step.ParamOwner, step.Ref(step.OpenStackMachine, n.Name)),
			"CAPO finds the running server by ID and adopts its ports instead of creating new ones")
	}
	// No group of its own: the Nodes' provider IDs (nodeProviderIDs) go
	// in the same one, as neither needs the other.
}

// nodeProviderIDs gives every node the provider ID of its server before
// its Machine is unpaused: Cluster API's Machine controller finds a
// Machine's Node by spec.providerID and nothing else, and a kubelet that
// ran without a cloud provider left it empty. A Node's provider ID can be
// set once, so one that names something else blocks the phase.
func (c *planCtx) nodeProviderIDs(b *phaseBuilder, nodes []observed.Node) {
	for _, n := range nodes {
		id := c.providerID(b, n)
		if n.ProviderID != "" && n.ProviderID != id && strings.HasPrefix(id, step.ProviderIDPrefix) {
			b.block("node %s has provider ID %s, but its server's is %s: Cluster API matches a Machine to its Node by provider ID, and a Node's cannot change", n.Name, n.ProviderID, id)
			continue
		}
		b.step(n.ProviderID == id, step.Workload, step.SetProviderID, step.Target{Kind: step.Node, Name: n.Name},
			step.NewParams(step.ParamProviderID, id), "Cluster API finds a Machine's Node by its provider ID")
	}
	b.group()
}

// kubeletVersion is the highest kubelet version among nodes, the version
// the adopted objects declare so that CAPI does not start an upgrade.
func kubeletVersion(nodes []observed.Node) string {
	v := ""
	for _, n := range nodes {
		if compareVersions(n.KubeletVersion, v) > 0 {
			v = n.KubeletVersion
		}
	}
	return v
}

// compareVersions compares vMAJOR.MINOR.PATCH strings numerically.
func compareVersions(a, b string) int {
	pa := strings.Split(strings.TrimPrefix(a, "v"), ".")
	pb := strings.Split(strings.TrimPrefix(b, "v"), ".")
	for i := 0; i < 3; i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(strings.SplitN(pa[i], "-", 2)[0])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(strings.SplitN(pb[i], "-", 2)[0])
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// unpause adds the step that lifts ferry's pause of an object. A pause the
// user set is never lifted: the phase is blocked instead. exists is false
// while the object is still to be created (paused, by ferry).
func (b *phaseBuilder) unpause(kind, name string, exists bool, p observed.Pause) {
	if exists && p.Paused && !p.ByFerry {
		b.block("%s %s is paused, and not by ferry: ferry never lifts a pause it did not set; unpause it to go on", kind, name)
	}
	b.step(exists && !p.Paused, step.Kube, step.Unpause, step.Target{Kind: kind, Name: name}, nil,
		"ferry paused it while it was built; CAPI takes over from here")
}

// identitySecret adds the step that fills the clouds.yaml Secret CAPO
// authenticates with (seed 001), copied from the plan's source Secret.
func (b *phaseBuilder) identitySecret(c *planCtx) {
	id := c.plan.Spec.Target.Identity
	done := c.snap.HasSecretKey(c.ns, id.SecretName, "clouds.yaml")
	if done && id.From != nil && id.From.CACertKey != "" {
		done = c.snap.HasSecretKey(c.ns, id.SecretName, "cacert")
	}
	if done {
		b.phase.Done++
		return
	}
	if id.From == nil {
		b.block("Secret %s/%s with clouds.yaml is missing and spec.target.identity.from names no Secret to copy it from", c.ns, id.SecretName)
		return
	}
	src := step.NamespacedName(id.From.Namespace, id.From.Name)
	if c.snap.Secret(id.From.Namespace, id.From.Name) == nil {
		b.block("identity source Secret %s not found", src)
	}
	keys := step.KeyCopy{Dst: "clouds.yaml", Src: id.From.CloudsKey}.String()
	if id.From.CACertKey != "" {
		keys += "," + step.KeyCopy{Dst: "cacert", Src: id.From.CACertKey}.String()
	}
	b.step(false, step.Kube, step.CopySecret, step.Target{Kind: step.Secret, Name: id.SecretName},
		step.NewParams(step.ParamFrom, src, step.ParamKeys, keys, step.ParamLabel, "clusterctl.cluster.x-k8s.io/move=true"),
		"CAPO authenticates to OpenStack with this clouds.yaml")
}

// openStackCluster adds the step that creates the OpenStackCluster from the
// plan, with the running control-plane endpoint.
func (b *phaseBuilder) openStackCluster(c *planCtx) {
	t := c.plan.Spec.Target
	if *t.APIServer.LoadBalancer && c.snap.OpenStackCluster == nil && c.snap.Cloud != nil && !c.snap.Cloud.LoadBalancer {
		b.block("spec.target.apiServer.loadBalancer is true, but the cloud's catalog lists no load-balancer service (Octavia): CAPO could not build the API load balancer; " +
			"set it to false to keep the running endpoint as it is")
	}
	var subnets []string
	for i := range t.Subnets {
		subnets = append(subnets, resource(&t.Subnets[i]))
	}
	rules := 0
	allowAll := false
	if t.SecurityGroups != nil {
		rules = len(t.SecurityGroups.AllNodesRules)
		allowAll = t.SecurityGroups.AllowAllInClusterTraffic
	}
	// CAPO manages the security groups and their rules as the plan says;
	// the parameter only counts the rules.
	var groups *v1alpha1.SecurityGroups
	if sg := t.SecurityGroups; sg != nil {
		groups = &v1alpha1.SecurityGroups{AllowAllInClusterTraffic: sg.AllowAllInClusterTraffic, AllNodesRules: slices.Clone(sg.AllNodesRules)}
	}
	b.stepWith(step.Inputs{SecurityGroups: groups}, c.snap.OpenStackCluster != nil, step.Kube, step.Create, step.Target{Kind: step.OpenStackCluster, Name: c.name},
		step.NewParams(
			step.ParamIdentityRef, c.identityRef(),
			step.ParamNetwork, resource(&t.Network),
			step.ParamSubnets, step.Resources(subnets...),
			step.ParamExternalNetwork, resource(t.ExternalNetwork),
			step.ParamDisableExternalNetwork, step.Bool(t.ExternalNetwork == nil),
			step.ParamDNSNameservers, strings.Join(t.DNSNameservers, ","),
			step.ParamControlPlaneZones, t.FailureDomain,
			step.ParamAPIServerLoadBalancer, step.Bool(*t.APIServer.LoadBalancer),
			step.ParamDisableAPIServerFloatIP, step.Bool(!*t.APIServer.FloatingIP),
			step.ParamAPIServerFixedIP, t.APIServer.FixedIP,
			step.ParamAPIServerFloatingIP, apiServerFloatingIP(t.ControlPlane.Provider),
			step.ParamManagedSecurityGroups, managedSecurityGroups(t.SecurityGroups != nil, allowAll, rules),
			step.ParamControlPlaneEndpoint, "kept from the Cluster",
		),
		"the cluster's OpenStack infrastructure: network, security groups, endpoint")
}

// apiServerFloatingIP describes the OpenStackCluster's apiServerFloatingIP:
// none with Kamaji, which owns the endpoint (seed 004) and has no
// control-plane machine whose deletion could take it.
func apiServerFloatingIP(provider string) string {
	if provider == v1alpha1.ProviderKamaji {
		return ""
	}
	return "the endpoint's address when it is an IP, so that deleting a control-plane machine keeps it"
}

func managedSecurityGroups(set, allowAll bool, rules int) string {
	if !set {
		return "none (the running servers keep theirs; spec.target.securityGroups asks CAPO to manage some)"
	}
	return fmt.Sprintf("allowAllInClusterTraffic=%t,allNodesRules=%d", allowAll, rules)
}

// waitOpenStackCluster adds the wait for CAPO to report the infrastructure ready.
func (b *phaseBuilder) waitOpenStackCluster(c *planCtx) {
	osc := c.snap.OpenStackCluster
	b.step(osc != nil && osc.Ready, step.Kube, step.Wait, step.Target{Kind: step.OpenStackCluster, Name: c.name},
		step.NewParams(step.ParamFor, step.ForReady, step.ParamTimeout, c.waitTimeout()),
		"CAPO reconciles network, security groups and endpoint")
}

// cloudControllerManager adds the step that applies the OpenStack CCM to
// the workload cluster, scheduled as the plan says.
func (b *phaseBuilder) cloudControllerManager(c *planCtx, why string) {
	m := c.plan.Spec.Manifests
	if m == nil || m.CloudControllerManager == nil {
		return
	}
	ccm := m.CloudControllerManager
	var tol []string
	for _, t := range ccm.Tolerations {
		tol = append(tol, t.Key+":"+t.Effect)
	}
	var sel []string
	for k, v := range ccm.NodeSelector {
		sel = append(sel, k+"="+v)
	}
	sort.Strings(sel)
	p := step.NewParams(step.ParamTolerations, strings.Join(tol, ","), step.ParamNodeSelector, strings.Join(sel, ","))
	if ccm.NodeSelector != nil && len(ccm.NodeSelector) == 0 {
		p[step.ParamNodeSelector] = step.NodeSelectorNone
	}
	// The parameters show the tolerations' keys and effects; the executor
	// applies them whole. maps.Clone keeps an empty selector empty (none)
	// and a nil one nil (the manifest's).
	in := step.Inputs{Scheduling: &step.Scheduling{NodeSelector: maps.Clone(ccm.NodeSelector), Tolerations: slices.Clone(ccm.Tolerations)}}
	b.stepWith(in, c.snap.Manifest(ccm.Path).Applied, step.Workload, step.Apply, step.Target{Kind: step.Manifest, Name: ccm.Path}, p, why)
}

func equalStrings(a, b []string) bool { return slices.Equal(a, b) }

func joinComma(s []string) string { return strings.Join(s, ",") }

// machineTemplate adds the step that creates the OpenStackMachineTemplate
// machines are built from: the plan's network, SSH key and identity.
func (b *phaseBuilder) machineTemplate(c *planCtx, name, flavor, image, reason string) {
	t := c.plan.Spec.Target
	b.step(has(c.snap.OpenStackMachineTemplates, name), step.Kube, step.Create, step.Target{Kind: step.OpenStackMachineTemplate, Name: name},
		step.NewParams(step.ParamFlavor, flavor, step.ParamImage, image, step.ParamSSHKeyName, t.SSHKey.Name,
			step.ParamPorts, step.NetworkPort(resource(&t.Network)), step.ParamIdentityRef, c.identityRef()),
		reason)
}

// openStackMachine adds the step that creates node n's OpenStackMachine,
// bound to its running server by provider ID.
func (b *phaseBuilder) openStackMachine(c *planCtx, n observed.Node, flavor, image string) {
	b.step(has(c.snap.OpenStackMachines, n.Name), step.Kube, step.Create, step.Target{Kind: step.OpenStackMachine, Name: n.Name},
		step.NewParams(step.ParamProviderID, c.providerID(b, n), step.ParamFlavor, flavor, step.ParamImage, image, step.ParamIdentityRef, c.identityRef()),
		"bound to the running server of node "+n.Name)
}

// machineInfrastructure adds the step that points an existing Machine at
// the OpenStackMachine of its name; nothing for a Machine still to create,
// which is created pointing there.
func (b *phaseBuilder) machineInfrastructure(m *observed.Machine) {
	if m == nil {
		return
	}
	b.step(m.InfrastructureRef == observed.Ref{Kind: step.OpenStackMachine, Name: m.Name}, step.Kube, step.Patch, step.Target{Kind: step.Machine, Name: m.Name},
		step.NewParams(step.ParamInfrastructureRef, step.Ref(step.OpenStackMachine, m.Name)),
		fmt.Sprintf("it refers to %s/%s", m.InfrastructureRef.Kind, m.InfrastructureRef.Name))
}
