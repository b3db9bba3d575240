package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/clusterevents"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/executor"
	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/memlimit"
	"github.com/ferry-dev/ferry/internal/reconciler"
)

// RunConfig is the configuration of `reconciler run`.
type RunConfig struct {
	Streams
	// Git is the plans repository; its URL is required.
	Git Git
	// Kube loads the management cluster's config.
	Kube RESTConfigGetter
	// NATS is an external NATS cluster; an empty URL embeds a server with
	// its store under DataDir.
	NATS events.BusOptions
	// Path is the directory of plan files in the repository.
	Path string
	// StatusBranch receives status/<plan>.yaml commits.
	StatusBranch string
	// DataDir holds the Git caches and the embedded NATS store.
	DataDir string
	// Interval is how often the repository is polled; Timeout bounds each
	// stage of a cycle; StallAfter is how long /healthz tolerates a loop
	// that ended no pass (0: reconciler.StallAfter).
	Interval, Timeout, StallAfter time.Duration
	// WebhookAddr serves the forge's webhooks (GitHub's or Gitea's, as
	// Forge.Kind says), signed with the secret in WebhookSecretFile
	// (required with it); empty: none.
	WebhookAddr, WebhookSecretFile string
	// MetricsAddr serves /metrics, /healthz and /readyz (and Go's profiles
	// with Pprof); empty: none.
	MetricsAddr string
	Pprof       bool
	// Leader, when Elect is set, runs the loop only while holding a Lease.
	Leader Leader
	// Forge, when its Repo is set, gets PR comments and commit statuses.
	Forge Forge
	// InProcess runs Executors in this process.
	InProcess bool
	Executors
	// NoCloud leaves OpenStack unobserved.
	NoCloud bool
}

// Leader is how `reconciler run` elects a leader among its replicas.
type Leader struct {
	Elect                     bool
	Namespace, Name, Identity string
}

// workloadMaxAge is how long the loop reuses a plan's observation of its
// workload cluster while none of the plan's steps ran: workload clusters
// have no informers, so a change made by others is seen within it.
const workloadMaxAge = 30 * time.Second

// Run watches the plans repository until ctx ends: it plans each plan
// against the live clusters and cloud, publishes the steps of approved
// phases, runs them (in process unless told otherwise), and writes status
// to Git and to pull requests.
func Run(ctx context.Context, cfg RunConfig) error {
	if cfg.Git.URL == "" {
		return usageErrorf("--repo is required")
	}
	if cfg.WebhookAddr != "" && cfg.WebhookSecretFile == "" {
		return usageErrorf("--webhook-secret-file is required with --webhook-addr")
	}
	if err := cfg.Forge.check(); err != nil {
		return err
	}
	if err := checkKinds(cfg.Kinds); cfg.InProcess && err != nil {
		return err
	}
	log := cfg.logger()
	ctx = logging.With(ctx, log)
	memlimit.Set(log)
	s := &server{cfg: cfg, log: log, mgmt: &management{getter: cfg.Kube}}
	defer s.close()
	if err := s.start(ctx); err != nil {
		return err
	}
	if !cfg.Leader.Elect {
		s.lead(ctx)
		return nil
	}
	return s.runAsLeader(ctx)
}

// server is `reconciler run`'s parts, built by start and closed by close.
type server struct {
	cfg     RunConfig
	log     *slog.Logger
	mgmt    *management
	client  client.WithWatch
	src     *gitsource.Source
	store   *gitsource.Branch // the status branch
	forge   *forgeClient
	bus     *events.Bus
	metrics *reconciler.Metrics
	rec     *reconciler.StatusRecorder
	loop    *reconciler.Loop
	closers []func()
}

// start builds the parts and starts the servers and the in-process
// executors; the loop itself runs in lead.
func (s *server) start(ctx context.Context) error {
	cfg := s.cfg
	var err error
	if s.client, err = s.mgmt.client(); err != nil {
		return err
	}
	if s.src, err = cfg.Git.source(cfg.Path, filepath.Join(cfg.DataDir, "git", "plans"), s.log); err != nil {
		return err
	}
	s.store = &gitsource.Branch{URL: cfg.Git.URL, Auth: cfg.Git.Auth, Name: cfg.StatusBranch,
		CacheDir: filepath.Join(cfg.DataDir, "git", "status"), Timeout: cfg.Git.Timeout}
	if s.forge, err = cfg.Forge.open(s.log); err != nil {
		return err
	}
	s.closers = append(s.closers, func() { s.forge.close(ctx) })
	nats := cfg.NATS
	nats.DataDir = cfg.DataDir
	if s.bus, err = connect(ctx, nats, "ferry-reconciler"); err != nil {
		return err
	}
	s.closers = append(s.closers, s.bus.Close)
	s.newLoop()
	if err := s.serveMetrics(ctx); err != nil {
		return err
	}
	if err := s.observe(ctx); err != nil {
		return err
	}
	if err := s.serveWebhook(ctx); err != nil {
		return err
	}
	return s.startExecutors(ctx)
}

// close closes what start opened, last first.
func (s *server) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// newLoop builds the metrics, the status recorder and the loop.
func (s *server) newLoop() {
	counters := map[string]func() float64{
		"ferry_git_ls_remotes_total": func() float64 { return float64(s.src.Stats().LsRemotes) },
		"ferry_git_fetches_total":    func() float64 { return float64(s.src.Stats().Fetches) },
		"ferry_git_pushes_total":     func() float64 { return float64(s.store.Pushes()) },
		"ferry_kube_requests_total":  func() float64 { return float64(s.mgmt.requests.Load()) },
	}
	if s.forge.coalescer != nil {
		counters["ferry_forge_requests_total"] = func() float64 { return float64(s.forge.coalescer.Stats().Requests) }
	}
	s.metrics = reconciler.NewMetrics(counters)
	s.metrics.Profiling = s.cfg.Pprof
	fg := s.forge.forge()
	approvals := &reconciler.GitApprovals{Source: s.src, Forge: fg, AllowPush: s.cfg.Forge.AllowPushApprovals, Policy: s.forge.policy}
	s.rec = &reconciler.StatusRecorder{Store: reconciler.GitStatusStore{Git: s.store}, Forge: fg, Approvals: approvals, Metrics: s.metrics}
	s.loop = &reconciler.Loop{
		Source: reconciler.GitSource{Source: s.src}, Publisher: &events.Publisher{JS: s.bus.JS}, Recorder: s.rec, Verifier: approvals,
		Path: s.src.PlansDir(), AfterCycle: s.metrics.ObserveCycle, AfterFlush: s.metrics.ObserveFlush, Latency: s.metrics.ObserveRoundTrip, Timeout: s.cfg.Timeout,
	}
	s.loop.History = s.history()
}

// HistoryConfigMap is the ConfigMap, in the leader election's namespace,
// where the loop keeps the last revision it acted on
// (reconciler.ConfigMapHistory).
const HistoryConfigMap = "ferry-history"

// history is where the loop keeps the last revision it acted on; nil,
// with a warning, without a clientset for the management cluster.
func (s *server) history() reconciler.HistoryStore {
	cfg, err := s.mgmt.config()
	if err == nil {
		var cs *kubernetes.Clientset
		if cs, err = kubernetes.NewForConfig(cfg); err == nil {
			ns := s.cfg.Leader.Namespace
			if ns == "" {
				ns = "ferry-system"
			}
			return reconciler.ConfigMapHistory{Client: cs, Namespace: ns, Name: HistoryConfigMap}
		}
	}
	s.log.Warn("the last revision acted on is not kept: a rewritten history of the plans repository is not noticed", "error", err)
	return nil
}

// serveMetrics watches the loop for stalls and serves /metrics, /healthz
// and /readyz on MetricsAddr until ctx ends.
func (s *server) serveMetrics(ctx context.Context) error {
	stallAfter := s.cfg.StallAfter
	if stallAfter == 0 {
		stallAfter = reconciler.StallAfter(s.cfg.Interval, s.cfg.Timeout)
	}
	s.metrics.Watch(s.loop, stallAfter, s.log)
	if s.cfg.MetricsAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.MetricsAddr)
	if err != nil {
		return fmt.Errorf("metrics address: %w", err)
	}
	go func() { _ = s.metrics.Serve(ctx, ln) }()
	return nil
}

// startExecutors runs the executors in this process when asked to.
func (s *server) startExecutors(ctx context.Context) error {
	if !s.cfg.InProcess {
		return nil
	}
	execs, err := newExecutors(s.cfg.Kinds, s.client, repoAt(s.src))
	if err != nil {
		return err
	}
	go func() {
		if err := executor.Run(ctx, events.JetStreamQueue{Conn: s.bus.Conn, JS: s.bus.JS}, execs, s.cfg.runOptions()); err != nil {
			s.log.Error("executors stopped", "error", err)
		}
	}()
	return nil
}

// lead runs the loop until ctx ends, from the recorded statuses.
func (s *server) lead(ctx context.Context) {
	s.metrics.Standby(false)
	s.relayWakes(ctx)
	s.recordClusterEvents(ctx)
	if err := s.rec.Restore(ctx, s.loop); err != nil && !errors.Is(err, reconciler.ErrNoStatus) {
		s.log.Warn("no recorded status read; starting from the observed state", "error", err)
	}
	// Results a killed predecessor took but had not acted on.
	since := time.Now().Add(-events.DuplicateWindow)
	if n, err := events.ReplayResults(ctx, s.bus.JS, since, s.loop.OnResult); err != nil {
		s.log.Warn("recent step results not replayed; a step whose result was lost waits until it is stale", "error", err)
	} else if n > 0 {
		s.log.Info("replayed recent step results", "results", n, "since", since.Format(time.RFC3339))
	}
	go func() {
		if err := events.RunResults(ctx, s.bus.JS, "ferry-reconciler", s.loop.OnResult); err != nil {
			s.log.Error("results consumer stopped", "error", err)
		}
	}()
	s.log.Info("reconciling", "repo", gitsource.RedactURL(s.cfg.Git.URL), "branch", s.cfg.Git.Branch, "interval", s.cfg.Interval)
	_ = s.loop.Run(ctx, s.cfg.Interval)
}

// recordClusterEvents has the status recorder write Events on the plans'
// Clusters until ctx ends. Only the leader does: it is the one whose
// status changes; a follower would report them a second time. Without a
// clientset there are no Events, and the rest runs as before.
func (s *server) recordClusterEvents(ctx context.Context) {
	cfg, err := s.mgmt.config()
	if err == nil {
		var cs *kubernetes.Clientset
		if cs, err = kubernetes.NewForConfig(cfg); err == nil {
			s.rec.Events = clusterevents.NewRecorder(ctx, cs, s.client)
			return
		}
	}
	s.log.Warn("no events on the plans' Clusters", "error", err)
}

// runAsLeader runs lead while this replica holds the Lease.
func (s *server) runAsLeader(ctx context.Context) error {
	cfg, err := s.cfg.Kube.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	l := s.cfg.Leader
	if l.Identity == "" {
		if l.Identity, err = os.Hostname(); err != nil {
			return fmt.Errorf("--leader-election-identity: no host name to default to: %w", err)
		}
	}
	s.metrics.Standby(true)
	return reconciler.RunAsLeader(ctx, cfg, reconciler.LeaderOptions{Namespace: l.Namespace, Name: l.Name, Identity: l.Identity}, s.lead)
}
