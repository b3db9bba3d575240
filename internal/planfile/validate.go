package planfile

import (
	"fmt"
	"net"
	"path"
	"slices"
	"strings"

	"github.com/ferry-dev/ferry/api/v1alpha1"
)

// fieldError is a semantic problem at a field path; Decode adds file and line.
type fieldError struct{ field, msg string }

// Taint keys the Kamaji rules name.
const (
	taintUninitialized = "node.cluster.x-k8s.io/uninitialized"
	labelControlPlane  = "node-role.kubernetes.io/control-plane"
	labelMaster        = "node-role.kubernetes.io/master"
)

// validate checks what the field rules cannot: fields that depend on each
// other, the strategy's phases and the control-plane provider's rules. It
// runs on a defaulted plan.
func validate(p *v1alpha1.MigrationPlan) []fieldError {
	v := &validator{}
	s := &p.Spec
	v.phases(p)
	v.resource("spec.target.network", &s.Target.Network)
	if s.Target.ExternalNetwork != nil {
		v.resource("spec.target.externalNetwork", s.Target.ExternalNetwork)
	}
	for i := range s.Target.Subnets {
		v.resource(fmt.Sprintf("spec.target.subnets[%d]", i), &s.Target.Subnets[i])
	}
	for i, ns := range s.Target.DNSNameservers {
		if net.ParseIP(ns) == nil {
			v.add(fmt.Sprintf("spec.target.dnsNameservers[%d]", i), "expected an IP address, got %q", ns)
		}
	}
	if key := s.Target.SSHKey.PublicKey; key != "" && !isPublicKey(key) {
		v.add("spec.target.sshKey.publicKey", "expected an OpenSSH public key (ssh-ed25519 AAAA..., ssh-rsa AAAA..., ecdsa-sha2-...)")
	}
	v.identitySource(p)
	v.workers(p)
	v.derivedNames(p)
	v.securityGroups(p)
	v.manifests(p)
	switch s.Target.ControlPlane.Provider {
	case v1alpha1.ProviderKubeadm:
		v.kubeadm(p)
	case v1alpha1.ProviderKamaji:
		v.kamaji(p)
	}
	return v.errs
}

type validator struct{ errs []fieldError }

// rollback checks spec.rollback against the strategy's phases: what it
// keeps must be a phase before the point of no return, and spec.approve
// may not ask to go further in the same commit.
func (v *validator) rollback(p *v1alpha1.MigrationPlan) {
	r := p.Spec.Rollback
	if r == nil || r.To == "" {
		return
	}
	to := p.PhaseIndex(r.To)
	last := p.PointOfNoReturn()
	switch {
	case r.To == v1alpha1.RollbackNone:
		to = -1
	case to < 0:
		v.add("spec.rollback.to", "%q is not a phase of strategy %s; expected none or one of %s",
			r.To, p.Spec.Strategy, strings.Join(rollbackTargets(p), ", "))
		return
	case last != "" && to >= p.PhaseIndex(last):
		v.add("spec.rollback.to", "%q is the point of no return of strategy %s or after it: nothing after it can be rolled back; expected none or one of %s",
			r.To, p.Spec.Strategy, strings.Join(rollbackTargets(p), ", "))
		return
	}
	if a := p.PhaseIndex(p.Spec.Approve); a > to {
		keep := r.To
		if to < 0 {
			keep = `"" (nothing)`
		}
		v.add("spec.approve", "%s is after spec.rollback.to %s: a rollback and a forward approval cannot be in one commit; set spec.approve to %s with the rollback, and raise it in a later commit that removes spec.rollback",
			p.Spec.Approve, r.To, keep)
	}
}

// rollbackTargets are the phases a rollback may keep: those before the
// point of no return.
func rollbackTargets(p *v1alpha1.MigrationPlan) []string {
	var out []string
	for _, ph := range p.Phases() {
		if ph == p.PointOfNoReturn() {
			break
		}
		out = append(out, ph)
	}
	return out
}

func (v *validator) add(field, format string, args ...any) {
	v.errs = append(v.errs, fieldError{field, fmt.Sprintf(format, args...)})
}

// phases checks that strategy-specific sections and approve fit the strategy.
func (v *validator) phases(p *v1alpha1.MigrationPlan) {
	s := &p.Spec
	if s.Strategy != v1alpha1.StrategyAdopt && s.Strategy != v1alpha1.StrategyReplace {
		// The strategy is missing or not one of the enum, which is already
		// reported; every rule here would only repeat that in other words.
		return
	}
	if s.Approve != "" && p.PhaseIndex(s.Approve) < 0 {
		why := ""
		switch {
		case s.Approve == v1alpha1.PhaseRollout && s.Strategy == v1alpha1.StrategyAdopt:
			why = " (set spec.adopt.rollout: true to add it)"
		case s.Approve == v1alpha1.PhaseNetworkBridge && s.Strategy == v1alpha1.StrategyReplace:
			why = " (it exists when spec.manifests.vpnOverlay names manifests)"
		}
		v.add("spec.approve", "%q is not a phase of strategy %s%s; expected one of %s",
			s.Approve, s.Strategy, why, strings.Join(p.Phases(), ", "))
	}
	v.rollback(p)
	if s.Strategy != v1alpha1.StrategyAdopt && s.Adopt != nil {
		v.add("spec.adopt", "applies to strategy adopt only; this plan's strategy is %s", s.Strategy)
	}
	if s.Strategy != v1alpha1.StrategyReplace && s.Cutover != nil {
		v.add("spec.cutover", "applies to strategy replace only: adopt keeps the running nodes, so nothing is drained")
	}
	if s.Strategy == v1alpha1.StrategyAdopt && s.Manifests != nil && len(s.Manifests.VPNOverlay) > 0 {
		v.add("spec.manifests.vpnOverlay", "applies to strategy replace only: adopt keeps the nodes where they are, so no overlay between clouds is needed")
	}
	if s.Strategy != v1alpha1.StrategyReplace && s.Replace != nil {
		v.add("spec.replace", "applies to strategy replace only; this plan's strategy is %s", s.Strategy)
	}
	if s.Strategy == v1alpha1.StrategyReplace && s.Replace == nil {
		v.add("spec.replace.oldMachineDeployments", "strategy replace needs the MachineDeployments of the old cloud, which it drains and deletes")
	}
	if s.Strategy == v1alpha1.StrategyReplace && len(s.Target.Workers) == 0 {
		v.add("spec.target.workers", "strategy replace needs at least one worker pool to move the workload onto")
	}
	if s.Replace != nil {
		for i, md := range s.Replace.OldMachineDeployments {
			if msg := checkFormat("dns1123-subdomain", md); msg != "" {
				v.add(fmt.Sprintf("spec.replace.oldMachineDeployments[%d]", i), "%s", msg)
			}
			for _, w := range s.Target.Workers {
				if md == s.Cluster.Name+"-"+w.Name {
					v.add(fmt.Sprintf("spec.replace.oldMachineDeployments[%d]", i),
						"%q is also the MachineDeployment of new worker pool %q; the old pools must keep other names", md, w.Name)
				}
			}
		}
	}
}

func (v *validator) resource(field string, r *v1alpha1.ResourceRef) {
	switch {
	case r.Name == "" && r.ID == "":
		v.add(field, "set name or id")
	case r.Name != "" && r.ID != "":
		v.add(field, "set name or id, not both")
	}
}

// ownSecrets are the Secrets deploy/ mounts into ferry's own pods:
// ferry-credentials (deploy/base/deployment.yaml and the executors of
// deploy/overlays/cluster: the Git and forge tokens, the webhook secret)
// and the NATS credentials of deploy/overlays/cluster (ferry-nats, and
// one Secret per role, ferry-nats-reconciler and ferry-nats-executor).
// TestOwnSecretsAreDeploys keeps the list in step with deploy/.
var ownSecrets = []string{"ferry-credentials", "ferry-nats", "ferry-nats-reconciler", "ferry-nats-executor"}

// identitySource refuses a spec.target.identity.from that names one of
// ferry's own Secrets, in any namespace (an installation may put ferry in
// another one): ferry copies the keys it names into the cluster's
// namespace, where whoever may read that namespace's Secrets would read
// ferry's credentials. The kube executor refuses a copied value that is
// not a clouds.yaml or a PEM certificate as well; this says so at the
// plan, with its file and line, before anything runs.
func (v *validator) identitySource(p *v1alpha1.MigrationPlan) {
	from := p.Spec.Target.Identity.From
	if from == nil || !slices.Contains(ownSecrets, from.Name) {
		return
	}
	v.add("spec.target.identity.from.name",
		"%q is a Secret ferry reads for itself (deploy/ mounts it into ferry's pods): its keys are ferry's own credentials, and identity.from copies keys into the cluster's namespace; "+
			"name the Secret that holds the cloud's clouds.yaml (the example plans use ferry-system/openstack-credentials)", from.Name)
}

func isPublicKey(key string) bool {
	for _, prefix := range []string{"ssh-ed25519 ", "ssh-rsa ", "ecdsa-sha2-", "sk-ssh-ed25519@openssh.com ", "sk-ecdsa-sha2-"} {
		if strings.HasPrefix(key, prefix) {
			return true
		}
	}
	return false
}

func (v *validator) workers(p *v1alpha1.MigrationPlan) {
	adopt := p.Spec.Strategy == v1alpha1.StrategyAdopt
	pools := len(p.Spec.Target.Workers)
	first := map[string]int{}
	for i, w := range p.Spec.Target.Workers {
		switch {
		case adopt && pools > 1 && len(w.NodeSelector) == 0:
			v.add(fmt.Sprintf("spec.target.workers[%d].nodeSelector", i),
				"required when adopt has more than one worker pool: it says which running nodes pool %q takes over", w.Name)
		case !adopt && len(w.NodeSelector) > 0:
			v.add(fmt.Sprintf("spec.target.workers[%d].nodeSelector", i),
				"applies to strategy adopt only: replace creates new nodes rather than taking over running ones")
		}
		if j, dup := first[w.Name]; dup {
			v.add(fmt.Sprintf("spec.target.workers[%d].name", i), "duplicate worker pool %q; first at spec.target.workers[%d]", w.Name, j)
			continue
		}
		first[w.Name] = i
	}
}

// derivedNames checks the object names ferry builds from the cluster's
// name: a name that is valid alone can still make them too long.
func (v *validator) derivedNames(p *v1alpha1.MigrationPlan) {
	c := p.Spec.Cluster.Name
	names := []string{c + "-kubeconfig", c + "-control-plane", p.Spec.Target.Identity.SecretName, p.Spec.Target.ControlPlane.Name}
	for _, w := range p.Spec.Target.Workers {
		names = append(names, c+"-"+w.Name+"-adopted")
	}
	for _, name := range names {
		if checkFormat("dns1123-subdomain", name) != "" {
			v.add("spec.cluster.name", "is too long for the names ferry derives from it: %q would be %d characters, Kubernetes allows %d",
				name, len(name), 253)
			return
		}
	}
}

func (v *validator) securityGroups(p *v1alpha1.MigrationPlan) {
	sg := p.Spec.Target.SecurityGroups
	if sg != nil {
		for i, r := range sg.AllNodesRules {
			if r.PortRangeMax < r.PortRangeMin {
				v.add(fmt.Sprintf("spec.target.securityGroups.allNodesRules[%d].portRangeMax", i),
					"must be >= portRangeMin (%d), got %d", r.PortRangeMin, r.PortRangeMax)
			}
		}
	}
	if p.Spec.Target.CNI != "calico" || (sg != nil && sg.AllowAllInClusterTraffic) {
		return
	}
	// Calico routes pod traffic with BGP and encapsulates it in IP-in-IP;
	// CAPO's managed security groups drop both unless rules admit them
	// (seed 004).
	if !hasRule(sg, "tcp", 179) {
		v.add("spec.target.securityGroups.allNodesRules",
			"cni is calico: add an ingress rule for BGP (protocol tcp, ports 179-179, remoteManagedGroups [worker]); without it nodes cannot exchange pod routes")
	}
	if !hasRule(sg, "4", 0) {
		v.add("spec.target.securityGroups.allNodesRules",
			"cni is calico: add an ingress rule for IP-in-IP (protocol \"4\", remoteManagedGroups [worker]); without it pod traffic between nodes is dropped")
	}
}

func hasRule(sg *v1alpha1.SecurityGroups, protocol string, port int) bool {
	if sg == nil {
		return false
	}
	for _, r := range sg.AllNodesRules {
		if r.Direction != "ingress" || !strings.EqualFold(r.Protocol, protocol) || !slices.Contains(r.RemoteManagedGroups, "worker") {
			continue
		}
		if port == 0 || (r.PortRangeMin <= port && port <= r.PortRangeMax) {
			return true
		}
	}
	return false
}

func (v *validator) manifests(p *v1alpha1.MigrationPlan) {
	m := p.Spec.Manifests
	if m == nil {
		return
	}
	if m.CloudControllerManager != nil {
		v.manifestPath("spec.manifests.cloudControllerManager.path", m.CloudControllerManager.Path)
	}
	for i, file := range m.VPNOverlay {
		v.manifestPath(fmt.Sprintf("spec.manifests.vpnOverlay[%d]", i), file)
	}
}

func (v *validator) manifestPath(field, file string) {
	switch {
	case file == "":
		v.add(field, "must name a manifest file")
	case path.IsAbs(file) || strings.HasPrefix(path.Clean(file), ".."):
		v.add(field, "must be a path inside the repository, relative to its root, got %q", file)
	case !strings.HasSuffix(file, ".yaml") && !strings.HasSuffix(file, ".yml"):
		v.add(field, "must be a YAML file (.yaml or .yml), got %q", file)
	}
}

func (v *validator) kubeadm(p *v1alpha1.MigrationPlan) {
	if api := p.Spec.Target.APIServer; api != nil && api.FloatingIP != nil && *api.FloatingIP && p.Spec.Target.ExternalNetwork == nil {
		v.add("spec.target.apiServer.floatingIP", "needs spec.target.externalNetwork: the floating IP comes from it (CAPO refuses a floating IP without an external network)")
	}
	cp := &p.Spec.Target.ControlPlane
	if cp.Flavor == "" {
		v.add("spec.target.controlPlane.flavor", "required with KubeadmControlPlane: the control-plane machines need a flavor")
	}
	if cp.Image == "" {
		v.add("spec.target.controlPlane.image", "required with KubeadmControlPlane: the control-plane machines need an image")
	}
	if cp.Kubelet != nil {
		v.add("spec.target.controlPlane.kubelet", "applies to KamajiControlPlane only; KubeadmControlPlane takes the kubelet settings of the running cluster")
	}
}

// kamaji checks the rules of seed 004: Kamaji serves the API from the
// management cluster and owns the endpoint, so CAPO must not create one, and
// there are no control-plane nodes.
func (v *validator) kamaji(p *v1alpha1.MigrationPlan) {
	t := &p.Spec.Target
	if t.ControlPlane.Flavor != "" {
		v.add("spec.target.controlPlane.flavor", "must be empty with KamajiControlPlane: its control plane runs as pods in the management cluster, not on machines")
	}
	if t.ControlPlane.Image != "" {
		v.add("spec.target.controlPlane.image", "must be empty with KamajiControlPlane: its control plane runs as pods in the management cluster, not on machines")
	}
	if t.APIServer.LoadBalancer != nil && *t.APIServer.LoadBalancer {
		v.add("spec.target.apiServer.loadBalancer", "must be false with KamajiControlPlane: Kamaji creates the control-plane endpoint itself, and a second load balancer from CAPO would compete with it")
	}
	if t.APIServer.FloatingIP != nil && *t.APIServer.FloatingIP {
		v.add("spec.target.apiServer.floatingIP", "must be false with KamajiControlPlane: there is no control-plane machine to attach a floating IP to; Kamaji exposes the endpoint")
	}
	if t.APIServer.FixedIP != "" {
		v.add("spec.target.apiServer.fixedIP", "must be empty with KamajiControlPlane: Kamaji sets the API server address from the endpoint it creates, got %q", t.APIServer.FixedIP)
	}
	if got := t.ControlPlane.Kubelet.PreferredAddressTypes; !slices.Equal(got, v1alpha1.KamajiPreferredAddressTypes) {
		v.add("spec.target.controlPlane.kubelet.preferredAddressTypes",
			"must be [%s] with KamajiControlPlane: the hosted API server cannot resolve node host names, so it must reach kubelets by IP first; got [%s]",
			strings.Join(v1alpha1.KamajiPreferredAddressTypes, ", "), strings.Join(got, ", "))
	}
	if p.Spec.Manifests == nil || p.Spec.Manifests.CloudControllerManager == nil {
		return
	}
	ccm := p.Spec.Manifests.CloudControllerManager
	for _, label := range []string{labelControlPlane, labelMaster} {
		if _, ok := ccm.NodeSelector[label]; ok {
			v.add("spec.manifests.cloudControllerManager.nodeSelector."+label,
				"must not be set with KamajiControlPlane: there are no control-plane nodes, so the cloud controller manager would never be scheduled")
		}
	}
	if !toleratesUninitialized(ccm.Tolerations) {
		v.add("spec.manifests.cloudControllerManager.tolerations",
			"must tolerate %s (effect NoSchedule) with KamajiControlPlane: the cloud controller manager runs on the workers and is what removes that taint from them", taintUninitialized)
	}
}

func toleratesUninitialized(ts []v1alpha1.Toleration) bool {
	for _, t := range ts {
		if t.Effect != "" && t.Effect != "NoSchedule" {
			continue
		}
		if t.Key == taintUninitialized || (t.Key == "" && t.Operator == "Exists") {
			return true
		}
	}
	return false
}
