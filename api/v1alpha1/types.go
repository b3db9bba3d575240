package v1alpha1

// The `ferry` struct tag carries the rules that the decoder checks on every
// field and that the JSON Schema generator writes out, so that the two never
// disagree (see Rules in tags.go):
//
//	required        the field must be present and not empty
//	enum=a|b        the value must be one of the listed strings
//	min=N           an integer must be >= N
//	format=F        a string must be a "dns1123-subdomain", "dns1123-label",
//	                "duration" (Go syntax, 90s, 10m) or "url" (http or https)

// APIVersion and Kind identify a MigrationPlan document.
const (
	APIVersion = "ferry.dev/v1alpha1"
	Kind       = "MigrationPlan"
)

// MigrationPlan is one cluster's migration onto OpenStack: which CAPI cluster,
// how it moves, where it goes, and how far it is approved to go.
type MigrationPlan struct {
	// APIVersion must be ferry.dev/v1alpha1.
	APIVersion string `json:"apiVersion" ferry:"required,enum=ferry.dev/v1alpha1"`
	// Kind must be MigrationPlan.
	Kind string `json:"kind" ferry:"required,enum=MigrationPlan"`
	// Metadata names the plan.
	Metadata Metadata `json:"metadata" ferry:"required"`
	// Spec is the migration.
	Spec Spec `json:"spec" ferry:"required"`
}

// Metadata names a plan. The name is the plan's identity in events, status
// files (status/<name>.yaml) and pull-request comments.
type Metadata struct {
	// Name of the plan, a DNS-1123 subdomain; by convention the cluster's name.
	Name string `json:"name" ferry:"required,format=dns1123-subdomain"`
}

// Strategy names how a cluster moves.
type Strategy string

const (
	// StrategyAdopt keeps the running nodes and rebuilds the CAPI objects
	// around them with OpenStack infrastructure kinds (seed 000).
	StrategyAdopt Strategy = "adopt"
	// StrategyReplace creates new machines in OpenStack, moves the workload
	// onto them and drains and removes the old ones (seed 003).
	StrategyReplace Strategy = "replace"
)

// Spec is what a plan asks for.
type Spec struct {
	// Cluster is the CAPI Cluster in the management cluster that moves.
	Cluster ClusterRef `json:"cluster" ferry:"required"`
	// Strategy is adopt (keep the running nodes, seed 000) or replace (new
	// OpenStack machines, drain and remove the old ones, seed 003).
	Strategy Strategy `json:"strategy" ferry:"required,enum=adopt|replace"`
	// Approve is the last phase that may run; phases after it are shown as
	// pending. Empty approves nothing. The phases of adopt are cluster,
	// control-plane, workers and (with adopt.rollout) rollout; those of
	// replace are prepare, network-bridge (with a VPN overlay), infrastructure,
	// workers, cutover and cleanup. Approve is raised by merging a pull
	// request; lowering it stops the migration before its next step.
	Approve string `json:"approve,omitempty" ferry:"enum=|cluster|control-plane|workers|rollout|prepare|network-bridge|infrastructure|cutover|cleanup"`
	// Rollback asks ferry to undo every phase after Rollback.To, the last
	// first, and is approved like a phase: by merging the pull request
	// that sets it. Approve must not be after Rollback.To. Remove it and
	// raise Approve again to migrate forward from where the rollback left
	// the cluster. Not possible once the point of no return (cleanup, or
	// rollout) has begun.
	Rollback *Rollback `json:"rollback,omitempty"`
	// Adopt holds the options of the adopt strategy.
	Adopt *AdoptOptions `json:"adopt,omitempty"`
	// Replace holds the options of the replace strategy.
	Replace *ReplaceOptions `json:"replace,omitempty"`
	// Target is the OpenStack cloud the cluster moves onto.
	Target Target `json:"target" ferry:"required"`
	// Manifests are applied to the workload cluster during the migration.
	Manifests *Manifests `json:"manifests,omitempty"`
	// Cutover configures how the old nodes are emptied (replace only).
	Cutover *Cutover `json:"cutover,omitempty"`
	// Timeouts bound the steps that wait for the cluster.
	Timeouts *Timeouts `json:"timeouts,omitempty"`
}

// RollbackNone is Rollback.To for undoing every phase: the cluster is
// again as it was before ferry started.
const RollbackNone = "none"

// Rollback is a request to undo phases.
type Rollback struct {
	// To is the last phase that stays done, or none to undo every phase.
	// It must be a phase of the strategy before its point of no return
	// (cleanup for replace, rollout for adopt).
	To string `json:"to" ferry:"required,enum=none|cluster|control-plane|workers|prepare|network-bridge|infrastructure|cutover"`
}

// ClusterRef names a CAPI Cluster.
type ClusterRef struct {
	// Name of the Cluster object.
	Name string `json:"name" ferry:"required,format=dns1123-subdomain"`
	// Namespace of the Cluster object. Default: default.
	Namespace string `json:"namespace,omitempty" ferry:"format=dns1123-label"`
}

// AdoptOptions configure the adopt strategy.
type AdoptOptions struct {
	// SecretsFrom is a namespace that holds copies of the cluster's
	// <cluster>-kubeconfig, -etcd, -ca and -sa Secrets, restored from there
	// when they are missing. ferry never generates them: a new CA would break
	// the running cluster. Empty: they must exist already.
	SecretsFrom string `json:"secretsFrom,omitempty" ferry:"format=dns1123-label"`
	// Rollout adds the rollout phase, which replaces every adopted machine
	// with one that CAPO builds. Default: false.
	Rollout bool `json:"rollout,omitempty"`
}

// ReplaceOptions configure the replace strategy.
type ReplaceOptions struct {
	// OldMachineDeployments are the MachineDeployments of the old cloud:
	// paused in prepare, their nodes drained in cutover and deleted in
	// cleanup. ferry deletes only what a plan names, so they are listed here
	// rather than guessed.
	OldMachineDeployments []string `json:"oldMachineDeployments" ferry:"required"`
	// Gateway is a server in OpenStack for the VPN overlay's far end (or a
	// bastion), built by CAPO's OpenStackServer controller in the
	// network-bridge phase and removed in cleanup. Its lifecycle is its
	// own, not the cluster's (seed 002): a change of its flavor or image
	// makes a new server, and the old one is deleted once the new one is
	// ACTIVE. Empty: no gateway.
	Gateway *Gateway `json:"gateway,omitempty"`
}

// Gateway is the VPN gateway (or bastion) server of the replace strategy,
// a CAPO OpenStackServer <name>-<hash> in the cluster's namespace, where
// <hash> is the first 8 hex digits of the SHA-256 of its flavor and image:
// a new flavor or image is a new server. ferry labels it
// ferry.dev/plan=<plan> and ferry.dev/gateway=<name>, and deletes only
// OpenStackServers with those labels.
type Gateway struct {
	// Name is the gateway's base name, a DNS-1123 label of at most 54
	// characters (the hash suffix makes 63).
	Name string `json:"name" ferry:"required,format=dns1123-label"`
	// Flavor of the server, resolved by the preflight.
	Flavor string `json:"flavor" ferry:"required"`
	// Image of the server, resolved by the preflight.
	Image string `json:"image" ferry:"required"`
	// Network the server's port is on. Default: target.network.
	Network *ResourceRef `json:"network,omitempty"`
	// SecurityGroups are the names of existing security groups for the
	// server's port. Default: the project's default group.
	SecurityGroups []string `json:"securityGroups,omitempty"`
}

// Target is the OpenStack cloud and the machines the cluster gets there.
// Names of networks, flavors and images are resolved to IDs through the
// OpenStack API when the plan runs.
type Target struct {
	// Identity is the clouds.yaml Secret CAPO authenticates with.
	Identity Identity `json:"identity" ferry:"required"`
	// ExternalNetwork gives floating IPs and the router's gateway.
	ExternalNetwork *ResourceRef `json:"externalNetwork,omitempty"`
	// Network is the network the machines attach to.
	Network ResourceRef `json:"network" ferry:"required"`
	// Subnets of Network to use; empty uses all of them.
	Subnets []ResourceRef `json:"subnets,omitempty"`
	// DNSNameservers for the cluster's subnet.
	DNSNameservers []string `json:"dnsNameservers,omitempty"`
	// FailureDomain is the Nova availability zone of the machines. Default: nova.
	FailureDomain string `json:"failureDomain,omitempty"`
	// SSHKey is the keypair the machines are created with; ferry ensures it
	// exists in OpenStack.
	SSHKey SSHKey `json:"sshKey" ferry:"required"`
	// APIServer configures the control-plane endpoint CAPO manages.
	// Defaults depend on the control-plane provider: a load balancer and a
	// floating IP for KubeadmControlPlane, neither for KamajiControlPlane.
	APIServer *APIServer `json:"apiServer,omitempty"`
	// CNI names the cluster's network plugin when its traffic needs
	// security group rules between nodes: calico (BGP and IP-in-IP) or
	// other. Default: other.
	CNI string `json:"cni,omitempty" ferry:"enum=|calico|other"`
	// SecurityGroups configures the security groups CAPO manages.
	SecurityGroups *SecurityGroups `json:"securityGroups,omitempty"`
	// ControlPlane is the control-plane provider and its machines.
	ControlPlane ControlPlane `json:"controlPlane" ferry:"required"`
	// Workers are the worker pools, one MachineDeployment each.
	Workers []WorkerPool `json:"workers,omitempty"`
}

// Identity is a clouds.yaml Secret in the cluster's namespace, the
// identityRef of the OpenStackCluster and machine templates (seed 001).
type Identity struct {
	// SecretName is the Secret CAPO reads. Default: <cluster>-cloud-config.
	SecretName string `json:"secretName,omitempty" ferry:"format=dns1123-subdomain"`
	// CloudName is the entry of clouds.yaml to use. Default: openstack.
	CloudName string `json:"cloudName,omitempty"`
	// From is a Secret ferry copies clouds.yaml (and the CA certificate)
	// from into SecretName. Empty: SecretName must exist already. Never one
	// of the Secrets ferry reads for itself (ferry-credentials, the NATS
	// credentials), and what it copies must be what it claims to be: the
	// copy step fails, writing nothing, when the value under CloudsKey is
	// not a clouds.yaml or the one under CACertKey is not PEM certificates.
	From *SecretSource `json:"from,omitempty"`
}

// SecretSource is an existing Secret whose keys ferry copies. Its values
// never appear in a plan, an event, a log, a commit or a comment.
type SecretSource struct {
	// Namespace of the Secret. Default: the cluster's namespace.
	Namespace string `json:"namespace,omitempty" ferry:"format=dns1123-label"`
	// Name of the Secret.
	Name string `json:"name" ferry:"required,format=dns1123-subdomain"`
	// CloudsKey is the key that holds clouds.yaml: YAML with a top-level
	// clouds map of clouds. Default: clouds.yaml.
	CloudsKey string `json:"cloudsKey,omitempty"`
	// CACertKey is the key that holds the PEM CA certificate of a cloud with
	// a private CA, copied as cacert: one or more CERTIFICATE blocks and
	// nothing else. Empty: the cloud has a public CA.
	CACertKey string `json:"caCertKey,omitempty"`
}

// ResourceRef names an OpenStack resource by name or by ID, not both.
type ResourceRef struct {
	// Name of the resource, resolved to an ID through the OpenStack API; two
	// resources with the name are an error.
	Name string `json:"name,omitempty"`
	// ID of the resource.
	ID string `json:"id,omitempty"`
}

// SSHKey is a Nova keypair.
type SSHKey struct {
	// Name of the keypair.
	Name string `json:"name" ferry:"required"`
	// PublicKey is the OpenSSH public key; ferry creates the keypair with it
	// when it is missing. Empty: the keypair must exist. Never a private key.
	PublicKey string `json:"publicKey,omitempty"`
}

// APIServer is how the control-plane endpoint is exposed. By default the
// running cluster's endpoint is kept as it is, and CAPO creates neither a
// load balancer nor a floating IP.
type APIServer struct {
	// LoadBalancer has CAPO create an Octavia load balancer for the API
	// server (default false). CAPO moves the endpoint's address onto the
	// new load balancer before it has a member: the API is unreachable
	// until the control-plane machines join it. It needs Octavia in the
	// cloud's catalog, which the preflight checks.
	LoadBalancer *bool `json:"loadBalancer,omitempty"`
	// FloatingIP has CAPO attach a floating IP from the external network
	// to the API server (default false). Needs externalNetwork.
	FloatingIP *bool `json:"floatingIP,omitempty"`
	// FixedIP is the API server's fixed IP on the cluster network. Must be
	// empty with KamajiControlPlane, which owns the endpoint.
	FixedIP string `json:"fixedIP,omitempty"`
}

// SecurityGroups configures CAPO's managed security groups.
type SecurityGroups struct {
	// AllowAllInClusterTraffic opens all traffic between the cluster's nodes.
	AllowAllInClusterTraffic bool `json:"allowAllInClusterTraffic,omitempty"`
	// AllNodesRules are extra rules on every node's security group.
	AllNodesRules []SecurityGroupRule `json:"allNodesRules,omitempty"`
}

// SecurityGroupRule is one rule of a managed security group, as in CAPO's
// allNodesSecurityGroupRules.
type SecurityGroupRule struct {
	// Name of the rule.
	Name string `json:"name" ferry:"required"`
	// Description of the rule.
	Description string `json:"description,omitempty"`
	// Direction: ingress or egress.
	Direction string `json:"direction" ferry:"required,enum=ingress|egress"`
	// EtherType: IPv4 or IPv6. Default: IPv4.
	EtherType string `json:"etherType,omitempty" ferry:"enum=|IPv4|IPv6"`
	// Protocol: a name (tcp, udp, icmp) or an IP protocol number ("4" is
	// IP-in-IP).
	Protocol string `json:"protocol,omitempty"`
	// PortRangeMin is the first port of the range.
	PortRangeMin int `json:"portRangeMin,omitempty" ferry:"min=0"`
	// PortRangeMax is the last port of the range.
	PortRangeMax int `json:"portRangeMax,omitempty" ferry:"min=0"`
	// RemoteManagedGroups are the managed groups (controlplane, worker,
	// bastion) the rule admits traffic from.
	RemoteManagedGroups []string `json:"remoteManagedGroups,omitempty"`
}

// Control-plane providers.
const (
	ProviderKubeadm = "KubeadmControlPlane"
	ProviderKamaji  = "KamajiControlPlane"
)

// ControlPlane is the cluster's control-plane provider.
type ControlPlane struct {
	// Provider is KubeadmControlPlane (machines in OpenStack) or
	// KamajiControlPlane (a hosted control plane, no machines; seed 004).
	Provider string `json:"provider" ferry:"required,enum=KubeadmControlPlane|KamajiControlPlane"`
	// Name of the control-plane object. Default: <cluster>-control-plane.
	Name string `json:"name,omitempty" ferry:"format=dns1123-subdomain"`
	// Flavor of the control-plane machines (KubeadmControlPlane).
	Flavor string `json:"flavor,omitempty"`
	// Image of the control-plane machines (KubeadmControlPlane).
	Image string `json:"image,omitempty"`
	// Kubelet configures the kubelets that join a KamajiControlPlane.
	Kubelet *Kubelet `json:"kubelet,omitempty"`
}

// Kubelet configures how a hosted control plane reaches the kubelets.
type Kubelet struct {
	// PreferredAddressTypes in order. With KamajiControlPlane it must be
	// InternalIP, ExternalIP, Hostname: node names do not resolve in DNS.
	PreferredAddressTypes []string `json:"preferredAddressTypes,omitempty"`
}

// WorkerPool is one MachineDeployment of OpenStack machines.
type WorkerPool struct {
	// Name of the pool; the MachineDeployment is <cluster>-<name>.
	Name string `json:"name" ferry:"required,format=dns1123-label"`
	// Flavor of the machines.
	Flavor string `json:"flavor" ferry:"required"`
	// Image of the machines.
	Image string `json:"image" ferry:"required"`
	// Replicas is the number of machines.
	Replicas int `json:"replicas" ferry:"required,min=1"`
	// FailureDomain overrides target.failureDomain for this pool.
	FailureDomain string `json:"failureDomain,omitempty"`
	// NodeSelector picks, by node label, the running nodes this pool adopts
	// (adopt only). Default: every worker node, allowed only when the plan
	// has one pool.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
}

// Manifests are applied to the workload cluster through its
// <cluster>-kubeconfig Secret. Paths are relative to the repository root.
type Manifests struct {
	// CloudControllerManager is the OpenStack cloud controller manager,
	// applied once the first control plane is adopted (adopt) or the new
	// infrastructure is ready (replace).
	CloudControllerManager *CloudControllerManager `json:"cloudControllerManager,omitempty"`
	// VPNOverlay are the manifests of a VPN overlay between the old and the
	// new cloud (seed 003), applied in the network-bridge phase of replace.
	VPNOverlay []string `json:"vpnOverlay,omitempty"`
}

// CloudControllerManager is the OpenStack CCM and how it is scheduled.
type CloudControllerManager struct {
	// Path of the manifest file.
	Path string `json:"path" ferry:"required"`
	// NodeSelector replaces the DaemonSet's node selector; unset keeps the
	// manifest's. With KamajiControlPlane it must not select control-plane
	// nodes, there are none: unset means none there.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations replace the DaemonSet's tolerations. With
	// KamajiControlPlane they must tolerate node.cluster.x-k8s.io/uninitialized
	// so that the CCM runs on the workers it initialises.
	Tolerations []Toleration `json:"tolerations,omitempty"`
}

// Toleration is a Kubernetes pod toleration.
type Toleration struct {
	// Key of the taint.
	Key string `json:"key,omitempty"`
	// Operator: Exists or Equal. Default: Equal.
	Operator string `json:"operator,omitempty" ferry:"enum=|Exists|Equal"`
	// Value of the taint.
	Value string `json:"value,omitempty"`
	// Effect of the taint: NoSchedule, PreferNoSchedule or NoExecute; empty
	// matches all.
	Effect string `json:"effect,omitempty" ferry:"enum=|NoSchedule|PreferNoSchedule|NoExecute"`
}

// Cutover configures how the old nodes are emptied in the replace strategy.
type Cutover struct {
	// DrainTimeout bounds the drain of one node. Default: 10m.
	DrainTimeout string `json:"drainTimeout,omitempty" ferry:"format=duration"`
	// ProbeURL is fetched after each drained node; the cutover goes on only
	// while it answers 2xx. It must not carry credentials.
	ProbeURL string `json:"probeURL,omitempty" ferry:"format=url"`
	// LoadBalancerService is a Service of type LoadBalancer in the workload
	// cluster that must have an external address before any node is drained.
	LoadBalancerService *ObjectRef `json:"loadBalancerService,omitempty"`
}

// ObjectRef names a namespaced Kubernetes object.
type ObjectRef struct {
	// Namespace of the object.
	Namespace string `json:"namespace" ferry:"required,format=dns1123-label"`
	// Name of the object.
	Name string `json:"name" ferry:"required,format=dns1123-subdomain"`
}

// Timeouts bound the steps that wait on the cluster.
type Timeouts struct {
	// Wait bounds each wait step (OpenStackCluster ready, control plane and
	// MachineDeployments stable, new nodes Ready). Default: 30m.
	Wait string `json:"wait,omitempty" ferry:"format=duration"`
}
