// Package observed is the snapshot of the world that the planner plans
// against: the CAPI and CAPO objects and Secrets of one cluster in the
// management cluster, the workload cluster's nodes, the OpenStack resources
// the plan names, and what ferry recorded in the plan's status. It is plain
// data, filled by internal/observer and by tests, and it never holds a
// secret's value: of a Secret it keeps only the names of its keys.
//
// It also owns the marks ferry leaves on what it changes (the ferry.dev/
// labels and annotations: who paused an object, which plan and phase
// created it), which the executors set and the observer reads back to tell
// ferry's doing from someone else's, and the Secrets an adoption takes
// over (AdoptSecrets). WithRepo carries the plans repository's tree at the
// revision being observed, for the manifests a plan names.
//
// It imports only the standard library and the other data packages
// (internal/layering's rule "the data packages hold data"): the planner,
// the status and the executors import it, and a client imported here
// would reach the planner.
package observed
