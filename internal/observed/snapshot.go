package observed

// Annotations and labels ferry sets on the objects it changes, and reads
// back to tell its own doing from the user's.
const (
	// AnnotationPausedBy marks an object that ferry paused; ferry lifts only
	// such pauses.
	AnnotationPausedBy = "ferry.dev/paused-by"
	// AnnotationAdopted marks a Machine that ferry built around a running node.
	AnnotationAdopted = "ferry.dev/adopted"
	// LabelPlan marks an object ferry created for a plan (a gateway's
	// OpenStackServer); ferry deletes only objects with its plan's label.
	LabelPlan = "ferry.dev/plan"
	// LabelGateway names the gateway (spec.replace.gateway.name) an
	// OpenStackServer is a generation of.
	LabelGateway = "ferry.dev/gateway"
	// LabelCreatedBy marks an object of the management cluster that ferry
	// created, with the plan's name; a rollback removes only such objects.
	// On an object of the workload cluster it is an annotation, set only
	// when ferry's apply created the object.
	LabelCreatedBy = "ferry.dev/created-by"
	// LabelPhase is the phase whose step created an object marked with
	// LabelCreatedBy: the phase whose rollback removes it.
	LabelPhase = "ferry.dev/phase"
	// LabelReplacedBy marks an old MachineDeployment that a replace plan
	// names (spec.replace.oldMachineDeployments), with the plan's name: set
	// in prepare, with ferry's pause, and required by cleanup's deletion
	// (deploy/'s admission policy refuses ferry the deletion of a
	// MachineDeployment without it or LabelCreatedBy).
	LabelReplacedBy = "ferry.dev/replaced-by"
	// AnnotationPreviousAddressTypes keeps, on a KamajiControlPlane whose
	// spec.kubelet.preferredAddressTypes ferry changed, what they were
	// (a JSON list, null when unset), for a rollback to restore.
	AnnotationPreviousAddressTypes = "ferry.dev/previous-preferred-address-types"
	// AnnotationPreviousInfrastructureRef keeps, on a Cluster whose
	// infrastructureRef ferry switched (replace), the reference it had
	// (JSON), for a rollback to switch back to.
	AnnotationPreviousInfrastructureRef = "ferry.dev/previous-infrastructure-ref"
	// AnnotationCordonedBy marks a workload Node that ferry cordoned (a
	// drain), with the plan's name; a rollback uncordons only such nodes.
	AnnotationCordonedBy = "ferry.dev/cordoned-by"
	// AnnotationLabelledBy marks a Secret that existed before ferry and
	// that ferry gave CAPI's cluster-name label, with the plan's name; a
	// rollback takes the label off again.
	AnnotationLabelledBy = "ferry.dev/labelled-by"
)

// Snapshot is everything the planner may look at for one plan.
type Snapshot struct {
	// Cluster is the CAPI Cluster; nil when it does not exist.
	Cluster *Cluster `json:"cluster,omitempty"`
	// Secrets are the cluster's Secrets the planner asks for
	// (<cluster>-<AdoptSecrets>, the identity Secret) and the copies the
	// plan names, without their values.
	Secrets []Secret `json:"secrets,omitempty"`
	// OpenStackCluster is the cluster's CAPO infrastructure; nil when absent.
	OpenStackCluster *OpenStackCluster `json:"openStackCluster,omitempty"`
	// ControlPlane is the KubeadmControlPlane or KamajiControlPlane the plan
	// names; nil when absent.
	ControlPlane *ControlPlane `json:"controlPlane,omitempty"`
	// KubeadmConfigs, KubeadmConfigTemplates and OpenStackMachineTemplates
	// are the names of those objects in the cluster's namespace.
	KubeadmConfigs            []string `json:"kubeadmConfigs,omitempty"`
	KubeadmConfigTemplates    []string `json:"kubeadmConfigTemplates,omitempty"`
	OpenStackMachineTemplates []string `json:"openStackMachineTemplates,omitempty"`
	// Machines, MachineSets and MachineDeployments of the cluster.
	Machines           []Machine           `json:"machines,omitempty"`
	MachineSets        []MachineSet        `json:"machineSets,omitempty"`
	MachineDeployments []MachineDeployment `json:"machineDeployments,omitempty"`
	// OpenStackMachines are the names of the cluster's OpenStackMachines.
	OpenStackMachines []string `json:"openStackMachines,omitempty"`
	// BoundServers are the names of the cluster's OpenStackServers that
	// record their Nova server (status.instanceID) and that ferry does not
	// hold paused.
	BoundServers []string `json:"boundServers,omitempty"`
	// Gateways are the OpenStackServers of the cluster's namespace that
	// ferry labelled for this plan (LabelPlan), and the one named as the
	// plan's gateway should be named, whoever made it; sorted by name.
	Gateways []OpenStackServer `json:"gateways,omitempty"`

	// Created are the objects of the cluster's namespace that ferry
	// created for this plan (LabelCreatedBy), sorted by kind and name:
	// what a rollback removes.
	Created []Created `json:"created,omitempty"`

	// Workload is the workload cluster; nil when it could not be reached,
	// and WorkloadError then says why.
	Workload      *Workload `json:"workload,omitempty"`
	WorkloadError string    `json:"workloadError,omitempty"`
	// Cloud is what OpenStack answered; nil when it was not asked (no
	// credentials yet, or a dry run without the cloud), and CloudError then
	// says why.
	Cloud      *Cloud `json:"cloud,omitempty"`
	CloudError string `json:"cloudError,omitempty"`

	// Record is what ferry wrote to the plan's status before.
	Record Record `json:"record,omitempty"`
}

// Ref is a reference to an object by kind and name, in the cluster's
// namespace.
type Ref struct {
	Kind string `json:"kind,omitempty"`
	Name string `json:"name,omitempty"`
}

// Pause is the CAPI pause state of an object.
type Pause struct {
	// Paused is Cluster spec.paused, or the cluster.x-k8s.io/paused
	// annotation on other objects.
	Paused bool `json:"paused,omitempty"`
	// ByFerry is true when ferry set the pause (AnnotationPausedBy), so
	// that ferry may lift it.
	ByFerry bool `json:"pausedByFerry,omitempty"`
}

// Cluster is the part of a CAPI Cluster the planner reads.
type Cluster struct {
	Pause
	InfrastructureRef Ref `json:"infrastructureRef"`
	ControlPlaneRef   Ref `json:"controlPlaneRef"`
	// ControlPlaneEndpoint is host:port of the running API server.
	ControlPlaneEndpoint string `json:"controlPlaneEndpoint,omitempty"`
	// PreviousInfrastructure is the infrastructureRef ferry switched away
	// from (AnnotationPreviousInfrastructureRef), when it did; empty when
	// the Cluster had none.
	PreviousInfrastructure *Ref `json:"previousInfrastructure,omitempty"`
}

// Created is an object ferry created for the plan.
type Created struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Phase is the phase whose step created it (LabelPhase).
	Phase string `json:"phase"`
	// Deleting: it has a deletion timestamp.
	Deleting bool `json:"deleting,omitempty"`
}

// Secret is a Secret's identity and the names of its keys.
type Secret struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Keys      []string `json:"keys,omitempty"`
	// Cluster is the value of its CAPI cluster-name label.
	Cluster string `json:"cluster,omitempty"`
	// Owners are its owner references, by kind and name.
	Owners []Ref `json:"owners,omitempty"`
	// LabelledByFerry: ferry gave it the cluster-name label
	// (AnnotationLabelledBy), which a rollback takes off.
	LabelledByFerry bool `json:"labelledByFerry,omitempty"`
}

// OpenStackCluster is the part of a CAPO OpenStackCluster the planner reads.
type OpenStackCluster struct {
	Pause
	Name  string `json:"name"`
	Ready bool   `json:"ready,omitempty"`
}

// OpenStackServer is the part of a CAPO OpenStackServer the planner reads.
type OpenStackServer struct {
	Name string `json:"name"`
	// Plan and Gateway are its LabelPlan and LabelGateway labels; Plan is
	// empty on one ferry did not create.
	Plan    string `json:"plan,omitempty"`
	Gateway string `json:"gateway,omitempty"`
	// Flavor and Image are the names in its spec.
	Flavor string `json:"flavor,omitempty"`
	Image  string `json:"image,omitempty"`
	// Ready is status.ready: CAPO saw its Nova server ACTIVE.
	Ready bool `json:"ready,omitempty"`
	// InstanceID is status.instanceID, the Nova server's ID.
	InstanceID string `json:"instanceID,omitempty"`
	// Deleting is true once it has a deletion timestamp.
	Deleting bool `json:"deleting,omitempty"`
}

// ControlPlane is a KubeadmControlPlane or KamajiControlPlane.
type ControlPlane struct {
	Pause
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Replicas is spec.replicas; the others are from status.
	Replicas            int `json:"replicas"`
	ReadyReplicas       int `json:"readyReplicas"`
	UpdatedReplicas     int `json:"updatedReplicas"`
	UnavailableReplicas int `json:"unavailableReplicas"`
	// Ready is status.ready.
	Ready bool `json:"ready,omitempty"`
	// Version is spec.version.
	Version string `json:"version,omitempty"`
	// InfrastructureRef is KCP spec.machineTemplate.infrastructureRef.
	InfrastructureRef Ref `json:"infrastructureRef,omitempty"`
	// RolloutAfter is KCP spec.rolloutAfter, RFC 3339, when set.
	RolloutAfter string `json:"rolloutAfter,omitempty"`
	// PreferredAddressTypes is KamajiControlPlane spec.kubelet.preferredAddressTypes.
	PreferredAddressTypes []string `json:"preferredAddressTypes,omitempty"`
	// ChangedByFerry: ferry changed its preferredAddressTypes and kept
	// what they were (AnnotationPreviousAddressTypes), for a rollback.
	ChangedByFerry bool `json:"changedByFerry,omitempty"`
	// Owners are its owner references, by kind and name: the Cluster
	// makes itself the owner of its control plane.
	Owners []Ref `json:"owners,omitempty"`
}

// Stable reports whether every replica is ready and up to date.
func (c *ControlPlane) Stable() bool {
	return c.Replicas == c.ReadyReplicas && c.Replicas == c.UpdatedReplicas && c.UnavailableReplicas == 0
}

// Machine is the part of a CAPI Machine the planner reads.
type Machine struct {
	Pause
	Name string `json:"name"`
	// ControlPlane is true for machines of the control plane.
	ControlPlane bool `json:"controlPlane,omitempty"`
	// Deployment and MachineSet name the owners of a worker machine.
	Deployment        string `json:"deployment,omitempty"`
	MachineSet        string `json:"machineSet,omitempty"`
	BootstrapRef      Ref    `json:"bootstrapRef,omitempty"`
	InfrastructureRef Ref    `json:"infrastructureRef,omitempty"`
	ProviderID        string `json:"providerID,omitempty"`
	// NodeRef is the name of the node the machine became; empty until then.
	NodeRef string `json:"nodeRef,omitempty"`
	// Adopted is true for a machine ferry built around a running node.
	Adopted bool `json:"adopted,omitempty"`
}

// MachineSet is the part of a CAPI MachineSet the planner reads.
type MachineSet struct {
	Pause
	Name              string `json:"name"`
	Deployment        string `json:"deployment,omitempty"`
	InfrastructureRef Ref    `json:"infrastructureRef,omitempty"`
}

// MachineDeployment is the part of a CAPI MachineDeployment the planner reads.
type MachineDeployment struct {
	Pause
	Name                string `json:"name"`
	Replicas            int    `json:"replicas"`
	ReadyReplicas       int    `json:"readyReplicas"`
	UpdatedReplicas     int    `json:"updatedReplicas"`
	UnavailableReplicas int    `json:"unavailableReplicas"`
	InfrastructureRef   Ref    `json:"infrastructureRef,omitempty"`
	RolloutAfter        string `json:"rolloutAfter,omitempty"`
	// Deleting: its deletion has begun (CAPI removes its Machines first).
	Deleting bool `json:"deleting,omitempty"`
}

// Stable reports whether every replica is ready and up to date.
func (m *MachineDeployment) Stable() bool {
	return m.Replicas == m.ReadyReplicas && m.Replicas == m.UpdatedReplicas && m.UnavailableReplicas == 0
}

// Workload is what the planner reads from the workload cluster.
type Workload struct {
	Nodes []Node `json:"nodes,omitempty"`
	// Manifests maps each manifest path of the plan to its state.
	Manifests map[string]Manifest `json:"manifests,omitempty"`
	// LoadBalancers maps namespace/name of a LoadBalancer Service to its
	// external address; empty while it has none.
	LoadBalancers map[string]string `json:"loadBalancers,omitempty"`
	// KubeadmConfig is true when the kube-system/kubeadm-config ConfigMap
	// exists: the running kubeadm spec the control plane is adopted with.
	KubeadmConfig bool `json:"kubeadmConfig,omitempty"`
	// KubernetesVersion is kubeadm's kubernetesVersion in that ConfigMap:
	// the control plane's version, which kube-proxy's image carries.
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// ExternalEtcd is true when that ClusterConfiguration names an
	// external etcd rather than the control-plane nodes' own (stacked).
	ExternalEtcd bool `json:"externalEtcd,omitempty"`
}

// Node is the part of a Node the planner reads.
type Node struct {
	Name         string            `json:"name"`
	Labels       map[string]string `json:"labels,omitempty"`
	Ready        bool              `json:"ready"`
	ControlPlane bool              `json:"controlPlane,omitempty"`
	// Unschedulable is spec.unschedulable: the node is cordoned.
	Unschedulable bool `json:"unschedulable,omitempty"`
	// Machine is the Machine Cluster API's Machine controller wrote on it
	// (annotation cluster.x-k8s.io/machine), once it matched them.
	Machine string `json:"machine,omitempty"`
	// CordonedByFerry: ferry cordoned it (AnnotationCordonedBy).
	CordonedByFerry bool   `json:"cordonedByFerry,omitempty"`
	ProviderID      string `json:"providerID,omitempty"`
	// KubeletVersion is status.nodeInfo.kubeletVersion.
	KubeletVersion string `json:"kubeletVersion,omitempty"`
	// PodsToEvict counts the pods a drain would evict (not DaemonSet or
	// mirror pods) from a cordoned node of a plan that drains (strategy
	// replace); 0 on a drained node, and on any other.
	PodsToEvict int `json:"podsToEvict,omitempty"`
}

// Manifest is the state of a manifest in the workload cluster.
type Manifest struct {
	// Applied: every object exists as the manifest at the plan's revision
	// describes it.
	Applied bool `json:"applied,omitempty"`
	// Healthy: its workloads (DaemonSets, Deployments) are available.
	Healthy bool `json:"healthy,omitempty"`
	// Created: an object of it exists that ferry's apply created (the
	// LabelCreatedBy annotation), which a rollback deletes.
	Created bool `json:"created,omitempty"`
}

// Cloud is what OpenStack answered.
type Cloud struct {
	// Resolved maps "<kind>/<name>" (flavor, image, network, subnet,
	// externalNetwork) to what the name resolved to.
	Resolved map[string]Resolution `json:"resolved,omitempty"`
	// Servers maps a server's name to its ID.
	Servers map[string]string `json:"servers,omitempty"`
	// Keypairs are the names of the project's keypairs.
	Keypairs []string `json:"keypairs,omitempty"`
	// QuotaShortfall says what quota the new machines lack; empty when the
	// quota covers them.
	QuotaShortfall string `json:"quotaShortfall,omitempty"`
	// Tagged are the resources ferry created for this plan and has not yet
	// removed, as "<kind>/<name>".
	Tagged []string `json:"tagged,omitempty"`
	// LoadBalancer is whether the catalog lists a load-balancer service.
	LoadBalancer bool `json:"loadBalancer,omitempty"`
}

// Resolution is a name looked up in OpenStack: an ID, or why there is none
// (not found, or several resources with that name).
type Resolution struct {
	ID    string `json:"id,omitempty"`
	Error string `json:"error,omitempty"`
}

// Record is what ferry wrote to the plan's status before this snapshot.
type Record struct {
	// Approved is the furthest phase ferry has acted on. A plan whose
	// approve is now before it has moved backwards.
	Approved string `json:"approved,omitempty"`
	// Checks are one-shot checks that passed (an HTTP probe after a drain),
	// by step key: they leave nothing in the cluster to observe.
	Checks []string `json:"checks,omitempty"`
	// Keypairs are the OpenStack keypairs ferry created for the plan:
	// nothing in the cloud tells them from the user's.
	Keypairs []string `json:"keypairs,omitempty"`
}
