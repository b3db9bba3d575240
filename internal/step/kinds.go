package step

import "github.com/ferry-dev/ferry/api/v1alpha1"

// Target kinds: the Target.Kind of every step. The Kubernetes ones are the
// objects' own kinds, so that a target reads as kubectl would name it.
const (
	Secret                   = "Secret"
	Cluster                  = "Cluster"
	OpenStackCluster         = "OpenStackCluster"
	OpenStackMachineTemplate = "OpenStackMachineTemplate"
	OpenStackMachine         = "OpenStackMachine"
	OpenStackServer          = "OpenStackServer"
	KubeadmControlPlane      = v1alpha1.ProviderKubeadm
	KamajiControlPlane       = v1alpha1.ProviderKamaji
	KubeadmConfig            = "KubeadmConfig"
	KubeadmConfigTemplate    = "KubeadmConfigTemplate"
	Machine                  = "Machine"
	MachineSet               = "MachineSet"
	MachineDeployment        = "MachineDeployment"
	// Node, Manifest and Service are in the workload cluster.
	Node     = "Node"
	Service  = "Service"
	Manifest = "Manifest"
	// MigrationPlan is the target of an approval.
	MigrationPlan = "MigrationPlan"
	// Cloud, Keypair and TaggedResources are OpenStack's.
	Cloud           = "Cloud"
	Keypair         = "Keypair"
	TaggedResources = "TaggedResources"
)

// targetKinds lists every target kind above, so that ParseKey gives a
// kind back as this package spells it.
var targetKinds = []string{Secret, Cluster, OpenStackCluster, OpenStackMachineTemplate, OpenStackMachine, OpenStackServer,
	KubeadmControlPlane, KamajiControlPlane, KubeadmConfig, KubeadmConfigTemplate, Machine, MachineSet, MachineDeployment,
	Node, Service, Manifest, MigrationPlan, Cloud, Keypair, TaggedResources}

// ClusterScoped reports whether a target kind has no namespace: the
// planner leaves its Target.Namespace empty.
func ClusterScoped(kind string) bool {
	return kind == Node || kind == Manifest || kind == MigrationPlan
}

// ProviderIDPrefix starts the provider ID of an OpenStack server, as the
// OpenStack cloud provider and CAPO write it: openstack:///<server-id>.
const ProviderIDPrefix = "openstack:///"
