// Package ostest builds test fixtures in the local OpenStack that
// hack/openstack-up.sh runs: a project and its user, an external network
// with a subnet, a tenant network with a router, flavors, an image, and
// servers named like the nodes of a cluster being adopted. Everything is
// created through gophercloud as the cloud's admin, with names unique to the
// test, and removed when the test ends.
//
// A test that uses it fails, rather than skips, when the services are not
// running: `make test-openstack` starts them.
//
// On top of the fixture it builds each scenario's cluster in that cloud
// (NewAdoptable for seed 000, NewReplaceable for seed 003, NewHosted for
// Kamaji's seed 004), boots a hollow kubelet for each server CAPO builds
// (Boot, since Nova's fake driver runs nothing), and checks the end state
// the real controllers made of it (Check, Before, CloudState).
//
// It is test support: only tests and hack/demo may import it
// (internal/layering's rule "test support stays out of the commands"),
// and it must not import internal/app or internal/reconciler (rule "the
// commands sit on top").
package ostest
