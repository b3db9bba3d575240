// Package kube holds what ferry's Kubernetes-facing code shares: the scheme of
// the core, Cluster API (core, kubeadm bootstrap and control plane) and CAPO
// types that ferry reads and writes in a management cluster.
//
// KamajiControlPlane has no Go types here (its provider's module is not
// available); ferry handles it as unstructured data.
//
// It owns, written once for the observer and the executors: the shared
// Scheme and the clients' rate limits (Tune); reading a cluster's
// <cluster>-kubeconfig Secret and connecting to the workload cluster with
// it (ConnectWorkload, with clients cached by kubeconfig and the core
// kinds mapped without discovery), where an unusable kubeconfig is terminal and names the
// Secret, never its content, and a usable one's token, password and key
// are registered with internal/redact; decoding the manifests a plan names
// (DecodeManifest); and a LoadBalancer Service's address.
//
// It must not import the observer, an executor, the bus, the planner, the
// reconciler or the status (internal/layering's rule "the shared clients
// sit below their users"): both the observer and the executors import it,
// and depending on either would tie the other to it.
package kube
