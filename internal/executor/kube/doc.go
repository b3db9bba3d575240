// Package kube is the executor of kind step.Kube: every change ferry makes
// to the management cluster. It creates the CAPI and CAPO objects a plan
// adopts or adds (created paused where CAPI must not act yet), patches
// their references, copies and labels Secrets, pauses and unpauses, waits
// for CAPI's and CAPO's controllers to report ready, and deletes the
// MachineDeployments a plan names (marked in prepare) and, in a rollback,
// what it created (labelled when created). Each action is idempotent; an
// error a person must fix is failure.Terminal.
package kube
