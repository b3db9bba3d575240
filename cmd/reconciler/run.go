package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/executor"
	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/memlimit"
	"github.com/ferry-dev/ferry/internal/observer"
	"github.com/ferry-dev/ferry/internal/reconciler"
	"github.com/ferry-dev/ferry/internal/status"
)

// runFlags are the flags of `reconciler run`.
type runFlags struct {
	git                                         gitFlags
	path, statusBranch, dataDir                 string
	interval, commentInterval                   time.Duration
	timeout, stallAfter                         time.Duration
	webhookAddr, webhookSecretFile, metricsAddr string
	leaderElect                                 bool
	leaseNamespace, leaseName, identity         string
	githubRepo, githubAPIURL, githubTokenFile   string
	kubeconfig, kubeContext, kinds              string
	concurrency, waits                          int
	inProcess, noCloud, pprof                   bool
	nats                                        natsFlags
}

// workloadMaxAge is how long the loop reuses a plan's observation of its
// workload cluster while none of the plan's steps ran: workload clusters
// have no informers, so a change made by others is seen within it.
const workloadMaxAge = 30 * time.Second

func runCommand(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runReconciler(ctx, args, stdout, stderr)
}

func (f *runFlags) register(flags *flag.FlagSet) {
	f.git.register(flags, "URL of the plans repository (https://, ssh:// or file://); required")
	flags.StringVar(&f.path, "path", gitsource.DefaultPath, "directory of plan files in the repository")
	flags.DurationVar(&f.interval, "interval", 30*time.Second, "how often to poll the repository (a webhook polls at once)")
	flags.DurationVar(&f.timeout, "timeout", 2*time.Minute, "bound on each stage of a cycle (a poll, the previews, one plan's observation and publication, a status write)")
	flags.DurationVar(&f.stallAfter, "stall-after", 0, "/healthz fails when the loop has not ended a pass, or one stage has run, for this long (0: 2×--interval + 2×--timeout + 1m)")
	flags.StringVar(&f.statusBranch, "status-branch", status.DefaultBranch, "branch that receives status/<plan>.yaml commits (may be the tracked branch)")
	flags.StringVar(&f.dataDir, "data-dir", "ferry-data", "directory for the Git caches and the embedded NATS store")
	flags.StringVar(&f.webhookAddr, "webhook-addr", "", "address for GitHub push and pull_request webhooks (e.g. :9090); empty: none")
	flags.StringVar(&f.webhookSecretFile, "webhook-secret-file", "", "file holding the webhook's HMAC secret (required with --webhook-addr)")
	flags.StringVar(&f.metricsAddr, "metrics-addr", ":8080", "address of /metrics, /healthz and /readyz; empty: none")
	flags.BoolVar(&f.leaderElect, "leader-elect", false, "run only while holding a Lease in the management cluster")
	flags.StringVar(&f.leaseNamespace, "leader-election-namespace", "ferry-system", "namespace of the leader election Lease")
	flags.StringVar(&f.leaseName, "leader-election-id", "ferry-reconciler", "name of the leader election Lease")
	flags.StringVar(&f.identity, "leader-election-identity", "", "this replica's identity in the Lease (default: the host name)")
	flags.StringVar(&f.githubRepo, "github-repo", "", "owner/name of the repository on GitHub, for PR comments and commit statuses; empty: none")
	flags.StringVar(&f.githubAPIURL, "github-api-url", "", "GitHub Enterprise base URL (empty: api.github.com)")
	flags.StringVar(&f.githubTokenFile, "github-token-file", "", "file holding the GitHub token (default: $"+forge.TokenEnv+")")
	flags.DurationVar(&f.commentInterval, "comment-interval", 10*time.Second, "at most one edit per PR comment and commit status per interval")
	flags.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the management cluster (default: in-cluster, $KUBECONFIG, ~/.kube/config)")
	flags.StringVar(&f.kubeContext, "context", "", "kubeconfig context")
	flags.BoolVar(&f.inProcess, "executors", true, "run the executors in this process (false: separate executor replicas, reconciler executor, take the steps)")
	flags.StringVar(&f.kinds, "kinds", strings.Join(allKinds, ","), "executor kinds to run in process")
	flags.IntVar(&f.concurrency, "concurrency", 32, "steps of each kind run at once in process")
	flags.IntVar(&f.waits, "waits", 64, "wait steps of each kind run at once in process, besides --concurrency")
	flags.BoolVar(&f.noCloud, "no-cloud", false, "do not observe OpenStack (steps that need it stay listed)")
	flags.BoolVar(&f.pprof, "pprof", false, "serve Go's profiles under /debug/pprof/ on --metrics-addr")
	f.nats.register(flags, true)
}

// runReconciler is `reconciler run` until ctx ends.
func runReconciler(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("run", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var f runFlags
	f.register(flags)
	flags.Usage = func() {
		fmt.Fprint(stderr, "Usage: reconciler run --repo URL [flags]\n\n"+
			"Watches the plans repository, plans each plan against the live clusters and\n"+
			"cloud, publishes the steps of approved phases, runs them (in process by\n"+
			"default), and writes status to Git and to pull requests.\n\nFlags:\n")
		flags.PrintDefaults()
	}
	if _, err := parseInterspersed(flags, args); err != nil {
		return 2
	}
	if f.git.repo == "" || (f.webhookAddr != "" && f.webhookSecretFile == "") {
		fmt.Fprint(stderr, "reconciler run: --repo is required, and --webhook-secret-file with --webhook-addr\n\n")
		flags.Usage()
		return 2
	}
	f.nats.dataDir = f.dataDir
	log := slog.New(slog.NewTextHandler(stderr, nil))
	memlimit.Set(log)
	if err := serve(ctx, &f, log); err != nil {
		fmt.Fprintf(stderr, "reconciler run: %v\n", err)
		return 1
	}
	return 0
}

// serve wires the parts and runs until ctx ends.
func serve(ctx context.Context, f *runFlags, log *slog.Logger) error {
	ctx = logging.With(ctx, log)
	mgmt, err := managementClient(f.kubeconfig, f.kubeContext)
	if err != nil {
		return err
	}
	src, err := f.git.source(f.path, filepath.Join(f.dataDir, "git", "plans"), log)
	if err != nil {
		return err
	}
	statusGit := &gitsource.Writer{URL: f.git.repo, Auth: f.git.auth(), Branch: f.statusBranch, CacheDir: filepath.Join(f.dataDir, "git", "status"), Timeout: f.git.timeout}
	store := status.Store{Git: statusGit}

	var fg forge.Forge
	var coalescer *forge.Coalescer
	if f.githubRepo != "" {
		owner, name, ok := strings.Cut(f.githubRepo, "/")
		if !ok {
			return fmt.Errorf("--github-repo %q: want owner/name", f.githubRepo)
		}
		token, err := forge.TokenFromFile(f.githubTokenFile)
		if err != nil {
			return err
		}
		gh, err := forge.New(owner, name, token, f.githubAPIURL)
		if err != nil {
			return err
		}
		coalescer = forge.NewCoalescer(gh, forge.CoalescerOptions{Interval: f.commentInterval, Logger: log})
		defer func() {
			closeCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = coalescer.Close(closeCtx)
		}()
		fg = coalescer
	}

	connectCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	bus, err := events.Connect(connectCtx, f.nats.options("ferry-reconciler"))
	cancel()
	if err != nil {
		return err
	}
	defer bus.Close()

	counters := map[string]func() float64{
		"ferry_git_ls_remotes_total": func() float64 { return float64(src.Stats().LsRemotes) },
		"ferry_git_fetches_total":    func() float64 { return float64(src.Stats().Fetches) },
		"ferry_git_pushes_total":     func() float64 { return float64(statusGit.Pushes()) },
		"ferry_kube_requests_total":  func() float64 { return float64(kubeRequests.Load()) },
	}
	if coalescer != nil {
		counters["ferry_forge_requests_total"] = func() float64 { return float64(coalescer.Stats().Requests) }
	}
	metrics := reconciler.NewMetrics(counters)
	metrics.Profiling = f.pprof

	rec := &reconciler.StatusRecorder{Store: store, Forge: fg, Approvals: reconciler.GitApprovals{Source: src, Forge: fg}, Metrics: metrics}
	loop := &reconciler.Loop{
		Source: reconciler.GitSource{Source: src}, Publisher: &events.Publisher{JS: bus.JS}, Recorder: rec,
		Path: src.PlansDir(), AfterCycle: metrics.ObserveCycle, Latency: metrics.ObserveRoundTrip, Timeout: f.timeout,
	}
	if f.stallAfter == 0 {
		f.stallAfter = reconciler.StallAfter(f.interval, f.timeout)
	}
	metrics.Watch(loop, f.stallAfter, log)
	if f.metricsAddr != "" {
		ln, err := net.Listen("tcp", f.metricsAddr)
		if err != nil {
			return fmt.Errorf("metrics address: %w", err)
		}
		go func() { _ = metrics.Serve(ctx, ln) }()
	}
	// The observer reads the CAPI and CAPO objects and the plans' Secrets
	// from shared informers; a change they see in a namespace marks the
	// plans there for observation and wakes the loop.
	mgmtConfig, err := managementConfig(f.kubeconfig, f.kubeContext)
	if err != nil {
		return err
	}
	cached, err := observer.NewCachedClient(ctx, mgmtConfig, loop.Changed)
	if err != nil {
		return err
	}
	obs := &observer.Observer{Client: cached, WorkloadMaxAge: workloadMaxAge}
	if !f.noCloud {
		obs.Cloud = &observer.OpenStack{Client: mgmt}
	}
	loop.Observer = obs
	if fg != nil {
		// Previews read pull requests' trees: their own observer, same cloud.
		previewObs := &observer.Observer{Client: cached, Cloud: obs.Cloud}
		loop.Previews = &reconciler.Previews{Forge: fg, Pulls: reconciler.GitSource{Source: src}, Observer: previewObs,
			Branch: f.git.branch, Path: src.PlansDir()}
	}

	if f.webhookAddr != "" {
		secret, err := gitsource.ReadWebhookSecret(f.webhookSecretFile)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", f.webhookAddr)
		if err != nil {
			return fmt.Errorf("webhook address: %w", err)
		}
		srv := &http.Server{Handler: gitsource.WebhookHandler(secret, loop.Wake), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		go func() { <-ctx.Done(); _ = srv.Close() }()
	}

	if f.inProcess {
		execs, err := newExecutors(strings.Split(f.kinds, ","), mgmt, repoAt(src), log)
		if err != nil {
			return err
		}
		go func() {
			if err := executor.Run(ctx, bus.Conn, bus.JS, execs, executor.RunOptions{Concurrency: f.concurrency, Waits: f.waits, Logger: log}); err != nil {
				log.Error("executors stopped", "error", err)
			}
		}()
	}

	lead := func(ctx context.Context) {
		if err := rec.Restore(ctx, loop); err != nil && !errors.Is(err, status.ErrNoStatus) {
			log.Warn("no recorded status read; starting from the observed state", "error", err)
		}
		go func() {
			if err := events.RunResults(ctx, bus.JS, "ferry-reconciler", loop.OnResult); err != nil {
				log.Error("results consumer stopped", "error", err)
			}
		}()
		log.Info("reconciling", "repo", gitsource.RedactURL(f.git.repo), "branch", f.git.branch, "interval", f.interval)
		_ = loop.Run(ctx, f.interval)
	}
	if !f.leaderElect {
		lead(ctx)
		return nil
	}
	cfg, err := restConfig(f.kubeconfig, f.kubeContext)
	if err != nil {
		return err
	}
	if f.identity == "" {
		if f.identity, err = os.Hostname(); err != nil {
			return fmt.Errorf("--leader-election-identity: no host name to default to: %w", err)
		}
	}
	return reconciler.RunAsLeader(ctx, cfg, reconciler.LeaderOptions{Namespace: f.leaseNamespace, Name: f.leaseName, Identity: f.identity}, lead)
}

// restConfig loads the management cluster's REST config.
func restConfig(kubeconfig, kubeContext string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
}
