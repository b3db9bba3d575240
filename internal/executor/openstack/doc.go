// Package openstack is the executor of kind step.OpenStack: the preflight
// against the cloud (names resolve, quota covers the new machines), the
// SSH keypair, the binding of adopted servers to CAPO's OpenStackServers,
// and the clean-up of what ferry created. It authenticates with the plan's
// identity Secret for each step, so a rotated password is picked up.
package openstack
