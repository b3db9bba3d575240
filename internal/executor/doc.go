// Package executor runs the executors, which hold every side effect of a
// migration: each takes the step events of its kind from the bus, makes
// the change idempotently and publishes a result (Run). The executors are
// one package per kind: kube (the management cluster's CAPI and CAPO
// objects, Secrets, pause and unpause, reference patches, waits),
// openstack (gophercloud: look-ups, keypairs, server bindings, clean-up)
// and workload (the migrated cluster: manifests, cordon, drain, probes).
// What they share is here: the Executor interface, the field manager and
// how a failed write is classified.
//
// No package of internal/executor may import the observer
// (internal/layering's rule "executors never import the observer"): an
// executor acts on the world as it is when its step runs, never on the
// observer's cached snapshot, and what both need (kubeconfigs, manifests,
// cloud credentials) lives in internal/kube and internal/openstack. Nor
// may one import the planner, the reconciler, the status, Git, the forge,
// planfile, clusterevents or internal/app (rule "an executor only runs its
// step"): a step carries everything its executor needs (its parameters,
// and its inputs in the event: events.StepEvent.Inputs), the event carries
// no plan, and planning, recording and talking to Git or the forge are the
// reconciler's. The
// kinds do not import each other (rule "executor kinds are
// independent"): a replica of one kind carries none of another's clients.
package executor
