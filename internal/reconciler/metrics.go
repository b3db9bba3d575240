package reconciler

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/planner"
)

// Metrics are the reconciler's Prometheus metrics, on their own registry
// (nothing global), served on --metrics-addr with /healthz and /readyz.
type Metrics struct {
	Registry *prometheus.Registry
	// Profiling serves Go's profiles under /debug/pprof/ too.
	Profiling bool

	phases        *prometheus.GaugeVec
	stepsRun      *prometheus.CounterVec
	stepLatency   *prometheus.HistogramVec
	stepRoundTrip *prometheus.HistogramVec
	cycles        *prometheus.CounterVec

	ready atomic.Bool
}

// NewMetrics registers the metrics. counters adds gauges read from other
// parts when scraped, such as Git fetches and forge calls (name → read).
func NewMetrics(counters map[string]func() float64) *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry()}
	m.phases = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ferry_plan_phases", Help: "Phases of all plans by state, as of the last cycle.",
	}, []string{"state"})
	m.stepsRun = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ferry_steps_total", Help: "Step attempts by executor kind and outcome.",
	}, []string{"executor", "outcome"})
	m.stepLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "ferry_step_duration_seconds", Help: "How long step attempts took, by executor kind.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
	}, []string{"executor"})
	m.stepRoundTrip = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "ferry_step_latency_seconds", Help: "From a step's publication to its final result, by executor kind.",
		Buckets: prometheus.ExponentialBuckets(0.001, 1.5, 30),
	}, []string{"executor"})
	m.cycles = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ferry_cycles_total", Help: "Reconcile cycles by result.",
	}, []string{"result"})
	m.Registry.MustRegister(m.phases, m.stepsRun, m.stepLatency, m.stepRoundTrip, m.cycles)
	for name, read := range counters {
		m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: "Calls counted by " + name + "."}, read))
	}
	return m
}

// ObservePhases sets the phase gauge from the phases' states of every
// plan.
func (m *Metrics) ObservePhases(states map[string][]planner.PhaseState) {
	counts := map[planner.PhaseState]int{}
	for _, plan := range states {
		for _, s := range plan {
			counts[s]++
		}
	}
	for _, s := range []planner.PhaseState{planner.Pending, planner.Approved, planner.Succeeded, planner.Blocked} {
		m.phases.WithLabelValues(string(s)).Set(float64(counts[s]))
	}
}

// ObserveResult counts a step attempt and its duration.
func (m *Metrics) ObserveResult(ev *events.ResultEvent) {
	m.stepsRun.WithLabelValues(ev.Executor, string(ev.Outcome)).Inc()
	m.stepLatency.WithLabelValues(ev.Executor).Observe(ev.Duration.Seconds())
}

// ObserveCycle counts a cycle; the first successful one makes /readyz pass.
func (m *Metrics) ObserveCycle(err error) {
	if err != nil {
		m.cycles.WithLabelValues("error").Inc()
		return
	}
	m.cycles.WithLabelValues("ok").Inc()
	m.ready.Store(true)
}

// Serve answers /metrics, /healthz (the process runs) and /readyz (a cycle
// succeeded) on addr until ctx ends.
func (m *Metrics) Serve(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !m.ready.Load() {
			http.Error(w, "no successful cycle yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	if m.Profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ObserveRoundTrip records how long a step took from its publication to its
// final result.
func (m *Metrics) ObserveRoundTrip(ev *events.ResultEvent, d time.Duration) {
	m.stepRoundTrip.WithLabelValues(ev.Executor).Observe(d.Seconds())
}
