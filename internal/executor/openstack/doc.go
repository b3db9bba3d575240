// Package openstack is the executor of kind step.OpenStack: the preflight
// against the cloud (names resolve, quota covers the new machines), the
// SSH keypair, the binding of adopted servers to CAPO's OpenStackServers,
// and the clean-up of what ferry created. It authenticates with the
// identity of the step's inputs (the plan's identity Secret) for each
// step, so a rotated password is picked up.
//
// It reaches the cloud through internal/openstack, the client it shares
// with the observer; it must not import the observer, the planner, the
// status, the reconciler, Git, the forge or the other executor kinds
// (internal/layering's rules on internal/executor/..., stated in
// internal/executor).
package openstack
