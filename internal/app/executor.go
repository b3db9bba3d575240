package app

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/executor"
	"github.com/ferry-dev/ferry/internal/executor/kube"
	"github.com/ferry-dev/ferry/internal/executor/openstack"
	"github.com/ferry-dev/ferry/internal/executor/workload"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/memlimit"
	"github.com/ferry-dev/ferry/internal/step"
)

// Kinds are the executor kinds, in the order --kinds lists them.
var Kinds = []string{string(step.Kube), string(step.OpenStack), string(step.Workload)}

// Executors say which executors run and how many steps at once.
type Executors struct {
	// Kinds of executors to run (see Kinds).
	Kinds []string
	// Concurrency is how many steps of each kind run at once.
	Concurrency int
	// Waits is how many wait steps of each kind run at once, besides
	// Concurrency.
	Waits int
}

// ExecutorConfig is the configuration of `reconciler executor`.
type ExecutorConfig struct {
	Streams
	Executors
	// Kube loads the management cluster's config.
	Kube RESTConfigGetter
	// NATS is the external NATS cluster; its URL is required.
	NATS events.BusOptions
	// Git is the plans repository that manifests are read from at each
	// step's revision; RepoDir, a checkout, stands in for it when URL is
	// empty. With neither, steps that read manifests fail.
	Git     Git
	RepoDir string
	// DataDir holds the Git cache of Git.URL.
	DataDir string
}

// Executor runs executors as a replica apart from the reconciler until ctx
// ends: it takes steps of its kinds from the shared NATS JetStream
// consumers, carries them out and publishes their results. Unfinished
// steps are handed back when it stops.
func Executor(ctx context.Context, cfg ExecutorConfig) error {
	if cfg.NATS.URL == "" {
		return usageErrorf("--nats-url is required: replicas share work through an external NATS cluster")
	}
	if err := checkKinds(cfg.Kinds); err != nil {
		return err
	}
	if err := cfg.NATS.Check(); err != nil {
		return &UsageError{Err: err}
	}
	log := cfg.logger()
	ctx = logging.With(ctx, log)
	memlimit.Set(log)
	c, err := (&management{getter: cfg.Kube}).client()
	if err != nil {
		return err
	}
	repo, err := cfg.repo(log)
	if err != nil {
		return err
	}
	execs, err := newExecutors(cfg.Kinds, c, repo)
	if err != nil {
		return err
	}
	// As an executor, it waits for the reconciler to create the streams:
	// its user may not (events.RolePermissions).
	cfg.NATS.Role = events.RoleExecutor
	bus, err := connect(ctx, cfg.NATS, "ferry-executor")
	if err != nil {
		if ctx.Err() != nil {
			// Stopped while it waited: a stop, not a failure.
			log.Info("executors stopped before the event streams were in place", "error", err)
			return nil
		}
		return err
	}
	defer bus.Close()
	log.Info("executors running", "kinds", strings.Join(cfg.Kinds, ","), "concurrency", cfg.Concurrency, "nats", events.RedactURL(cfg.NATS.URL))
	if err := executor.Run(ctx, events.JetStreamQueue{Conn: bus.Conn, JS: bus.JS}, execs, cfg.runOptions()); err != nil {
		return err
	}
	log.Info("executors stopped")
	return nil
}

// repo is where the workload executor reads manifests at a revision.
func (cfg ExecutorConfig) repo(log *slog.Logger) (func(context.Context, string) (fs.FS, error), error) {
	switch {
	case cfg.Git.URL != "":
		src, err := cfg.Git.source("", filepath.Join(cfg.DataDir, "git", "plans"), log)
		if err != nil {
			return nil, &UsageError{Err: err}
		}
		return repoAt(src), nil
	case cfg.RepoDir != "":
		dir := os.DirFS(cfg.RepoDir)
		return func(context.Context, string) (fs.FS, error) { return dir, nil }, nil
	}
	return nil, nil
}

func (e Executors) runOptions() executor.RunOptions {
	return executor.RunOptions{Concurrency: e.Concurrency, Waits: e.Waits}
}

// checkKinds returns a UsageError naming the first unknown kind.
func checkKinds(kinds []string) error {
	for _, k := range kinds {
		if !slices.Contains(Kinds, k) {
			return usageErrorf("unknown executor kind %q; kinds are %s", k, strings.Join(Kinds, ", "))
		}
	}
	return nil
}

// newExecutors builds the executors of the named kinds.
func newExecutors(kinds []string, c client.WithWatch, repo func(context.Context, string) (fs.FS, error)) ([]executor.Executor, error) {
	var out []executor.Executor
	for _, k := range kinds {
		switch step.Kind(k) {
		case step.Kube:
			out = append(out, &kube.Executor{Client: c})
		case step.OpenStack:
			out = append(out, &openstack.Executor{Client: c})
		case step.Workload:
			out = append(out, &workload.Executor{Client: c, Repo: repo})
		default:
			return nil, usageErrorf("unknown executor kind %q; kinds are %s", k, strings.Join(Kinds, ", "))
		}
	}
	return out, nil
}

// connect connects to the event bus, giving up after 30 seconds; an
// executor waits for the reconciler to create the streams as long as it
// runs (events.Connect logs the wait), since a pod that exits for it
// would only restart into the same wait. Credentials that do not go
// together, or a password file that cannot be read, are usage errors: the
// --nats-* flags must change.
func connect(ctx context.Context, opts events.BusOptions, name string) (*events.Bus, error) {
	if opts.Role != events.RoleExecutor {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	opts.Name = name
	bus, err := events.Connect(ctx, opts)
	if errors.Is(err, events.ErrCredentials) {
		return nil, &UsageError{Err: err}
	}
	return bus, err
}
