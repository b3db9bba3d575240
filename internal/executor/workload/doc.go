// Package workload is the executor of kind step.Workload: every change
// ferry makes to the migrated cluster itself, reached through the
// <cluster>-kubeconfig Secret in the management cluster. It applies the
// plans repository's manifests (server-side, as field manager ferry) and
// waits for them, waits for a LoadBalancer Service's address, sets Nodes'
// provider IDs, cordons, drains and deletes Nodes, and probes the
// application between drains.
package workload
