// Package status is a plan's status as data, and the pure merge that keeps
// it: per phase Pending, Approved, Running, Succeeded, Failed, Blocked,
// RollingBack or RolledBack; per step its state, attempts, last error and
// timestamps; the revision it was planned from and who approved it.
//
// Each cycle the reconciler loop, for each plan, merges the planner's result
// into the previous status (FromResult), marks the group it publishes
// (Published), takes in the executors' results (ApplyResult) and who approved
// (SetApproval), and feeds the status back to the planner (Record). These
// functions are pure: no clock, no I/O.
//
// The rest is elsewhere: the status file's YAML and its place on the status
// branch in internal/status/statusfile, the table and the pull-request
// comment in internal/status/render, and the store that commits the files
// to Git in internal/reconciler (GitStatusStore). This package imports the
// data it is built from (the planner's result, the events, the steps,
// the observed record); it must not import Git (internal/layering's rule
// "the status imports no Git package"), the forge or a Kubernetes or
// OpenStack client (rule "the status speaks to no forge, cluster or
// cloud"), the reconciler, the status file or a renderer.
package status
