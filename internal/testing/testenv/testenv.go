// Package testenv starts the real backends that ferry's integration tests run
// against, each in one call and each torn down with t.Cleanup:
//
//   - StartKube: a Kubernetes API server and etcd (controller-runtime envtest
//     over the binaries that `make tools` builds) with the CRDs of CAPI core,
//     kubeadm bootstrap and control plane, CAPO and KamajiControlPlane;
//   - StartNATS: an embedded NATS server with JetStream on a random port and
//     a temporary file store;
//   - StartGit: a Git server over http:// (git http-backend) serving a bare
//     repository seeded from a directory of files.
//
// A backend that cannot start fails the test with the reason; no test is ever
// skipped because a backend is missing.
package testenv

// Env is a running set of all backends.
type Env struct {
	Kube *Kube
	NATS *NATS
	Git  *Git
}

// Options configures Start.
type Options struct {
	// GitSeed is a directory whose files become the first commit of the Git
	// server's repository. Empty starts the repository with no commits.
	GitSeed string
}

// Start starts every backend for t. Tests that need one backend start only
// that one (StartKube, StartNATS, StartGit): the API server takes seconds,
// the others milliseconds.
func Start(t T, opts Options) *Env {
	t.Helper()
	return &Env{
		Kube: StartKube(t),
		NATS: StartNATS(t),
		Git:  StartGit(t, opts.GitSeed),
	}
}
