package step

import "github.com/ferry-dev/ferry/api/v1alpha1"

// Inputs are what an executor needs of the plan besides a step's
// parameters: values people need not read on every step (the cluster the
// step acts for, its control plane), values a parameter shows only in
// part or in words (a whole public key, the security-group rules,
// tolerations with their operators and values), and lists of names that
// a parameter joins for display. The planner resolves them from the plan
// with the step (Step.Inputs), and the step event carries them beside the
// step (events.StepEvent.Inputs), so that an executor reads only its step
// and never the plan.
//
// They are not part of a step's JSON, and String never shows them: the
// preview, `reconciler plan`, the status and the step catalogue show a
// step's parameters, which stay what people read. Like the parameters,
// they never hold a secret's value: Secrets appear by name only.
type Inputs struct {
	// Cluster is the plan's CAPI Cluster: its name labels what ferry
	// creates, and its <name>-kubeconfig Secret in its namespace reaches
	// the workload cluster. Every step has it.
	Cluster v1alpha1.ClusterRef `json:"cluster"`
	// ControlPlane is the plan's control plane: its kind
	// (KubeadmControlPlane or KamajiControlPlane) and name. Every step has
	// it.
	ControlPlane ObjectRef `json:"controlPlane"`
	// Identity is the plan's OpenStack identity: the clouds.yaml Secret in
	// the cluster's namespace, the cloud, and the Secret it is copied
	// from. Every step of the openstack executor has it; it authenticates
	// with it.
	Identity *v1alpha1.Identity `json:"identity,omitempty"`
	// PublicKey is the whole OpenSSH public key an ensure-keypair step
	// creates the keypair with (ParamPublicKey shows its type and comment).
	PublicKey string `json:"publicKey,omitempty"`
	// CloudNames are the OpenStack resources a resolve step looks up by
	// name (ParamNames shows their keys).
	CloudNames []v1alpha1.CloudName `json:"cloudNames,omitempty"`
	// Machines are the new machines a check-quota step needs the quota to
	// cover, by flavor (ParamMachines shows their count).
	Machines []v1alpha1.Machines `json:"machines,omitempty"`
	// SecurityGroups are the security groups CAPO manages for the
	// OpenStackCluster a create step makes; nil, none
	// (ParamManagedSecurityGroups describes them).
	SecurityGroups *v1alpha1.SecurityGroups `json:"securityGroups,omitempty"`
	// Scheduling is how the pods of the manifest an apply step applies are
	// scheduled: set on the cloud controller manager's apply only.
	Scheduling *Scheduling `json:"scheduling,omitempty"`
}

// Scheduling is where a manifest's pods run (the plan's
// spec.manifests.cloudControllerManager): the node selector and
// tolerations its DaemonSets and Deployments get.
type Scheduling struct {
	// NodeSelector replaces the pod template's node selector; nil keeps
	// the manifest's, empty removes it (a Kamaji cluster has no
	// control-plane nodes to select, seed 004). It is not omitted when
	// empty: JSON would read an omitted one back as nil.
	NodeSelector map[string]string `json:"nodeSelector"`
	// Tolerations, when there are any, replace the pod template's.
	Tolerations []v1alpha1.Toleration `json:"tolerations,omitempty"`
}
