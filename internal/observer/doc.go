// Package observer fills an observed.Snapshot for one plan from the
// management cluster (CAPI and CAPO objects, Secrets by key name), the
// workload cluster (nodes, pods to evict, manifests, load balancers),
// reached through its <cluster>-kubeconfig Secret, and OpenStack through a
// CloudObserver. It only reads. A workload cluster or cloud that cannot be
// reached is recorded in the snapshot (WorkloadError, CloudError) rather
// than failing the observation: the planner decides what that blocks.
//
// It owns how ferry looks at the world: the shared informers of the
// management cluster's kinds, indexed by cluster, whose events wake the
// reconciler for the plan concerned (NewCachedClient, ClusterOf); how long
// a workload cluster's and a cloud's observation is reused, and Forget,
// which a step's result calls so that what ferry changed is seen at once.
// The clients it reads through are internal/kube's and internal/openstack's,
// which the executors share.
//
// It must not import an executor, the bus (internal/events), the planner,
// the status, the reconciler, Git or the forge (internal/layering's rule
// "the observer only reads"): acting, publishing, planning and recording
// come after it. The reconciler takes it as an interface, and the executors
// never import it.
package observer
