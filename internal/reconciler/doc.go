// Package reconciler is ferry's loop: on each new revision of the plans
// repository and each step result it observes every plan's clusters and
// cloud, plans, publishes the next runnable group of steps, and records the
// status. It is level-triggered: what woke it does not matter; each cycle
// looks at everything again.
//
// It owns the order of a cycle and what it remembers between cycles:
// loading a revision and its plan files (revision.go), reconciling one
// plan (reconcile.go), acting only on approvals and plan content that a
// pull request merged into the tracked branch made (verify.go,
// approvals.go) with the reviews the review policy asks (policy.go), on a
// history that only moves forward (history.go: the last revision acted on
// and the keypairs ferry created, kept in a ConfigMap), the loop's memory of what is in flight
// (memory.go, one plan's in planstate.go); the StatusRecorder, which
// turns the planner's results and the executors' results into each plan's
// status, commits the statuses that changed to the status branch and
// mirrors them to the pull request (record.go), and the StatusStore it
// commits and reads them through, GitStatusStore over gitsource.Branch
// (statusstore.go); the preview comment, the merge gate and the `/ferry`
// commands (preview.go, gate.go, commands.go); `reconciler plan`'s dry
// run; the metrics, leader election on a Lease, and the watchdog behind
// /healthz (watchdog.go).
//
// It reaches the world only through what it is given: a Source, an
// Observer, a Publisher and a StatusStore, interfaces at their point of
// use that internal/app fills. It must not import the observer, an
// executor, or the Kubernetes-object and OpenStack clients (internal/kube,
// internal/openstack, gophercloud) (internal/layering's rule "the loop
// reaches the world through what it is given"), so that it runs the same
// with the executors in its process or in other replicas; and no internal
// package but internal/app may import it (rule "the commands sit on
// top").
package reconciler
