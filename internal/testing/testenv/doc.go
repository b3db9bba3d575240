// Package testenv starts the real backends that ferry's integration tests run
// against, each in one call and each torn down with t.Cleanup:
//
//   - StartKube: a Kubernetes API server and etcd (controller-runtime envtest
//     over the binaries that `make tools` builds) with the CRDs of CAPI core,
//     kubeadm bootstrap and control plane, CAPO and KamajiControlPlane,
//     its etcd started on a copy of a data directory in which an API server
//     bootstrapped and created them (etcdTemplate, made once per machine);
//   - StartNATS: an embedded NATS server with JetStream on a random port,
//     taking only clients with its random token (its URL carries it), and
//     a temporary file store;
//   - StartGit: a Git server over http:// (git http-backend) serving a bare
//     repository seeded from a directory of files.
//
// A backend that cannot start fails the test with the reason; no test is ever
// skipped because a backend is missing.
//
// Beyond those three it starts a real Gitea with its accounts and
// webhooks (StartGitea), the CAPI and CAPO managers as processes
// (StartManagers), a scheduler, a controller manager and hollow kubelets
// for a workload API server (Kube.RunPods), real nodes whose pods are
// containers (NewHost, Host.Network, Host.StartNodes: containerd, runc, a
// kubelet and kube-proxy per node, each in a network namespace of its
// own, and the machine put back as it was afterwards), a three-node NATS cluster
// over TLS whose users have the permissions of ferry's roles
// (StartNATSCluster), Git over SSH (StartSSHGit), a plans repository whose
// pull requests the GitHub stand-in serves (NewPlansRepo), the stand-ins for
// controllers that cannot run here (StartDockerStandIn,
// StartKamajiStandIn, StartControllerStandIns, StartKubelet), and the
// faults tests inject (StartProxy refuses or blackholes a TCP service,
// Kube.RestartAPIServer, NATS.Restart); SecretForms lists the forms a
// planted secret takes in text, for the tests and the demo's chaos run
// that look for one. Its callers are tests and, through Program (a T
// outside a test), the demo and the benchmark.
//
// It is test support: only tests, hack/ and internal/testing may import
// it (internal/layering's rule "test support stays out of the commands"),
// and it must not import internal/app or internal/reconciler (rule "the
// commands sit on top").
package testenv
