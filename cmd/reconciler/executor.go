package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/executor"
	"github.com/ferry-dev/ferry/internal/executor/kube"
	"github.com/ferry-dev/ferry/internal/executor/openstack"
	"github.com/ferry-dev/ferry/internal/executor/workload"
	"github.com/ferry-dev/ferry/internal/memlimit"
	"github.com/ferry-dev/ferry/internal/step"
)

// natsFlags are the flags that say where the event bus is.
type natsFlags struct {
	url, creds, ca, cert, key, dataDir string
}

func (n *natsFlags) register(flags *flag.FlagSet, embeddedDefault bool) {
	usage := "URL of an external NATS cluster with JetStream (nats://host:4222)"
	if embeddedDefault {
		usage += "; empty runs an embedded server with its store under --data-dir"
	}
	flags.StringVar(&n.url, "nats-url", "", usage)
	flags.StringVar(&n.creds, "nats-creds", "", "NATS credentials file for --nats-url")
	flags.StringVar(&n.ca, "nats-ca", "", "CA bundle that verifies the NATS servers")
	flags.StringVar(&n.cert, "nats-cert", "", "client certificate for NATS (with --nats-key)")
	flags.StringVar(&n.key, "nats-key", "", "client key for NATS (with --nats-cert)")
}

func (n *natsFlags) options(name string) events.BusOptions {
	return events.BusOptions{URL: n.url, DataDir: n.dataDir, CredsFile: n.creds, TLSCA: n.ca, TLSCert: n.cert, TLSKey: n.key, Name: name}
}

// allKinds are the executor kinds, in the order --kinds lists them.
var allKinds = []string{string(step.Kube), string(step.OpenStack), string(step.Workload)}

// newExecutors builds the executors of the named kinds.
func newExecutors(kinds []string, c client.WithWatch, repo func(context.Context, string) (fs.FS, error), log *slog.Logger) ([]executor.Executor, error) {
	var out []executor.Executor
	for _, k := range kinds {
		switch step.Kind(k) {
		case step.Kube:
			out = append(out, &kube.Executor{Client: c, Logger: log})
		case step.OpenStack:
			out = append(out, &openstack.Executor{Client: c})
		case step.Workload:
			out = append(out, &workload.Executor{Client: c, Repo: repo, Logger: log})
		default:
			return nil, fmt.Errorf("unknown executor kind %q; kinds are %s", k, strings.Join(allKinds, ", "))
		}
	}
	return out, nil
}

func executorCommand(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runExecutorCommand(ctx, args, stdout, stderr)
}

// runExecutorCommand is the executor command until ctx ends.
func runExecutorCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("executor", flag.ContinueOnError)
	flags.SetOutput(stderr)
	kinds := flags.String("kinds", strings.Join(allKinds, ","), "executor kinds to run, comma-separated")
	concurrency := flags.Int("concurrency", 32, "steps of each kind run at once")
	waits := flags.Int("waits", 64, "wait steps of each kind run at once, besides --concurrency")
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig of the management cluster (default: in-cluster, $KUBECONFIG, then ~/.kube/config)")
	kubeContext := flags.String("context", "", "kubeconfig context to use")
	repoDir := flags.String("repo-dir", "", "a checkout of the plans repository, where manifest paths are read at every revision (instead of --repo)")
	dataDir := flags.String("data-dir", "ferry-data", "directory for the Git cache of --repo")
	var git gitFlags
	git.register(flags, "URL of the plans repository, where the workload executor reads manifests at each step's revision")
	var nats natsFlags
	nats.register(flags, false)
	flags.Usage = func() {
		fmt.Fprint(stderr, "Usage: reconciler executor --nats-url URL [flags]\n\n"+
			"Runs executors as a replica apart from the reconciler: it takes steps of\n"+
			"the given kinds from the shared NATS JetStream consumers, carries them out\n"+
			"and publishes their results. Replicas of one kind share its work.\n"+
			"It stops on SIGINT or SIGTERM, handing unfinished steps back.\n\nFlags:\n")
		flags.PrintDefaults()
	}
	if _, err := parseInterspersed(flags, args); err != nil {
		return 2
	}
	if nats.url == "" {
		fmt.Fprint(stderr, "reconciler executor: --nats-url is required: replicas share work through an external NATS cluster\n\n")
		flags.Usage()
		return 2
	}
	for _, k := range strings.Split(*kinds, ",") {
		if !slices.Contains(allKinds, k) {
			fmt.Fprintf(stderr, "reconciler executor: unknown executor kind %q; kinds are %s\n", k, strings.Join(allKinds, ", "))
			return 2
		}
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	memlimit.Set(log)
	c, err := managementClient(*kubeconfig, *kubeContext)
	if err != nil {
		fmt.Fprintf(stderr, "reconciler executor: %v\n", err)
		return 1
	}
	var repo func(context.Context, string) (fs.FS, error)
	switch {
	case git.repo != "":
		src, err := git.source("", filepath.Join(*dataDir, "git", "plans"), log)
		if err != nil {
			fmt.Fprintf(stderr, "reconciler executor: %v\n", err)
			return 2
		}
		repo = repoAt(src)
	case *repoDir != "":
		repo = func(context.Context, string) (fs.FS, error) { return os.DirFS(*repoDir), nil }
	}
	execs, err := newExecutors(strings.Split(*kinds, ","), c, repo, log)
	if err != nil {
		fmt.Fprintf(stderr, "reconciler executor: %v\n", err)
		return 2
	}
	connectCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	bus, err := events.Connect(connectCtx, nats.options("ferry-executor"))
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "reconciler executor: %v\n", err)
		return 1
	}
	defer bus.Close()
	log.Info("executors running", "kinds", *kinds, "concurrency", *concurrency, "nats", nats.url)
	if err := executor.Run(ctx, bus.Conn, bus.JS, execs, executor.RunOptions{Concurrency: *concurrency, Waits: *waits, Logger: log}); err != nil {
		fmt.Fprintf(stderr, "reconciler executor: %v\n", err)
		return 1
	}
	log.Info("executors stopped")
	return 0
}
