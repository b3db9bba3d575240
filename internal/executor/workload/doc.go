// Package workload is the executor of kind step.Workload: every change
// ferry makes to the migrated cluster itself, reached through the
// <cluster>-kubeconfig Secret in the management cluster. It applies the
// plans repository's manifests (server-side, as field manager ferry) and
// waits for them, waits for a LoadBalancer Service's address, sets Nodes'
// provider IDs, cordons, drains and deletes Nodes, and probes the
// application between drains.
//
// It connects to the workload cluster with internal/kube's ConnectWorkload,
// as the observer does, and drains with kubectl's drain package; it must
// not import the observer, the planner, the status, the reconciler, Git,
// the forge or the other executor kinds (internal/layering's rules on
// internal/executor/..., stated in internal/executor).
package workload
