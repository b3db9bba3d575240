// Package memlimit gives the Go runtime a soft memory limit from the
// container's, for the reconciler's commands and for the benchmark that
// runs them as in a container.
//
// It owns reading the cgroup's limit (v2, then v1) and the Share of it the
// runtime aims under; internal/app calls Set when `run` and `executor`
// start, and hack/bench uses Of to give the reconciler the limit of the
// container it stands for.
//
// It imports only the standard library (internal/layering's rule "the
// leaves import only the standard library").
package memlimit
