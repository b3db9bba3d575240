// Package statustest holds the fixtures of the status's tests: a small
// adopt-like plan (cluster, control-plane, workers) with the step shapes
// the planner makes, planner results and executor results at fixed times,
// the operations of the reconciler loop on a status (Plan, Publish, Apply),
// and whole statuses built through them (Cases), which the status's, the
// renderers', the status file's and the status store's tests share.
//
// It imports the status and the data it is built from (the planner's
// result, the events, the steps). It must not import the renderers or the
// status file, whose own tests import it, nor a backend; only tests may
// import it (internal/layering's rule "test support stays out of the
// commands").
package statustest
