// Package kube is the executor of kind step.Kube: every change ferry makes
// to the management cluster. It creates the CAPI and CAPO objects a plan
// adopts or adds (created paused where CAPI must not act yet), patches
// their references, copies Secrets (a value copied as clouds.yaml or
// cacert only if it is one) and labels them, pauses and unpauses, waits
// for CAPI's and CAPO's controllers to report ready, and deletes the
// MachineDeployments a plan names (marked in prepare) and, in a rollback,
// what it created (labelled when created). Each action is idempotent; an
// error a person must fix is failure.Terminal.
//
// It reaches the management cluster through the controller-runtime client
// it is given and internal/kube's scheme and kubeconfig reading; it must
// not import the observer, the planner, the status, the reconciler, Git,
// the forge or the other executor kinds (internal/layering's rules on
// internal/executor/..., stated in internal/executor).
package kube
