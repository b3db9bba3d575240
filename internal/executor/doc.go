// Package executor runs the executors, which hold every side effect of a
// migration: each takes the step events of its kind from the bus, makes
// the change idempotently and publishes a result (Run). The executors are
// one package per kind: kube (the management cluster's CAPI and CAPO
// objects, Secrets, pause and unpause, reference patches, waits),
// openstack (gophercloud: look-ups, keypairs, server bindings, clean-up)
// and workload (the migrated cluster: manifests, cordon, drain, probes).
// What they share is here: the Executor interface, the field manager and
// how a failed write is classified.
package executor
