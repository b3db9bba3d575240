// Package executor holds every side effect of a migration. Executors take step
// events, make the change idempotently and publish a result. Kinds: kube (the
// management cluster's CAPI and CAPO objects, Secrets, pause and unpause,
// reference patches, waits), openstack (gophercloud: look-ups, keypairs,
// clean-up) and workload (the migrated cluster: cordon, drain, manifests).
package executor
