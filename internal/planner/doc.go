// Package planner turns a migration plan and a snapshot of observed state into
// the ordered groups of steps that are still to be done. It is pure: no I/O,
// no clock, no logger; the same input gives the same output, byte for byte.
// The step catalogue it implements is docs/steps.md, generated from it.
//
// It owns the strategies (adopt, with a kubeadm or a Kamaji control
// plane; replace; the gateway; the rollbacks): which steps each phase
// takes, in which groups and order, why each is needed, what each waits
// for, and which health checks block a phase; and Render, the text of
// `reconciler plan` and of the pull-request preview. A step whose effect
// the snapshot shows is not planned, so that planning again after any
// step, or after a crash, gives what is left.
//
// It imports only the data packages (api/v1alpha1, internal/observed,
// internal/step, internal/failure) and the standard library, and none of
// context, log, os, net or math/rand (internal/layering's rules "the
// planner is pure" and "the planner does no I/O and keeps no clock"):
// observation happens before it (internal/observer), publishing and
// logging after it (internal/reconciler).
package planner
