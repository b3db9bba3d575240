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
