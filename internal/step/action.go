package step

// Action is what an executor does to a step's target. Which actions an
// executor kind accepts, on which target kinds, is the executor's to say;
// an action it does not know is a terminal error of the step.
type Action string

// Actions of the management cluster (Kube).
const (
	// Create makes the target unless it exists.
	Create Action = "create"
	// Patch sets the fields its parameters name.
	Patch Action = "patch"
	// Pause sets ferry's pause on the target.
	Pause Action = "pause"
	// Unpause lifts a pause ferry set, never one a user set.
	Unpause Action = "unpause"
	// CopySecret copies keys of a source Secret into the target Secret.
	CopySecret Action = "copy-secret"
	// Label sets labels on an existing Secret.
	Label Action = "label"
	// Remove deletes an object ferry created, so that no controller acts
	// on its deletion: it is paused and its finalizers are taken off, and
	// it is deleted only if nothing changed it in between (a rollback).
	Remove Action = "remove"
	// Release undoes what ferry did to an object it did not create (a
	// Secret, a KamajiControlPlane): the owner references to objects ferry
	// created (which would take the object with them) and the cluster-name
	// label ferry gave it.
	Release Action = "release"
	// Restore sets back what ferry changed in an object it did not create
	// and kept the earlier value of (a KamajiControlPlane's
	// preferredAddressTypes), for a rollback.
	Restore Action = "restore"
)

// Actions of more than one executor kind.
const (
	// Wait watches the target until the ParamFor clauses hold.
	Wait Action = "wait"
	// Delete removes the target (a MachineDeployment, a Node, the
	// OpenStack resources tagged with the plan, a keypair ferry created,
	// or the objects of a manifest that ferry's apply created).
	Delete Action = "delete"
)

// Actions of the workload cluster (Workload).
const (
	// Apply applies a manifest of the plans repository.
	Apply Action = "apply"
	// Cordon marks a node unschedulable.
	Cordon Action = "cordon"
	// Uncordon lifts a cordon ferry set (a rollback).
	Uncordon Action = "uncordon"
	// Drain evicts a node's pods.
	Drain Action = "drain"
	// Probe asks a URL for an answer between drains.
	Probe Action = "probe"
	// SetProviderID sets a Node's spec.providerID.
	SetProviderID Action = "set-provider-id"
)

// Actions of the cloud (OpenStack).
const (
	// Resolve looks every name the plan gives up in the cloud.
	Resolve Action = "resolve"
	// CheckQuota checks that the quota covers the new machines.
	CheckQuota Action = "check-quota"
	// EnsureKeypair creates the plan's SSH keypair unless it exists.
	EnsureKeypair Action = "ensure-keypair"
	// Bind records a running server in CAPO's OpenStackServer.
	Bind Action = "bind"
)

// AwaitApproval is the Approval kind's only action: a person approves
// the next phase.
const AwaitApproval Action = "await-approval"

// Actions lists every action, in the order they are declared above: what
// the documentation's step catalogue must show.
func Actions() []Action {
	return []Action{Create, Patch, Pause, Unpause, CopySecret, Label, Remove, Release, Restore,
		Wait, Delete, Apply, Cordon, Uncordon, Drain, Probe, SetProviderID,
		Resolve, CheckQuota, EnsureKeypair, Bind, AwaitApproval}
}
