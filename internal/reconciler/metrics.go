package reconciler

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/step"
)

// Metrics are the reconciler's Prometheus metrics, on their own registry
// (nothing global), served on --metrics-addr with /healthz and /readyz.
type Metrics struct {
	Registry *prometheus.Registry
	// Profiling serves Go's profiles under /debug/pprof/ too.
	Profiling bool

	phases *prometheus.GaugeVec
	phase  *prometheus.GaugeVec
	// phaseStates are the state each plan/phase series of phase shows.
	phaseStates   map[[2]string]status.PhaseState
	stepsRun      *prometheus.CounterVec
	stepLatency   *prometheus.HistogramVec
	stepRoundTrip *prometheus.HistogramVec
	cycles        *prometheus.CounterVec
	statusWrites  *prometheus.CounterVec
	// unrecordedSince is when the status writes began to fail, in Unix
	// nanoseconds; 0 while the last one succeeded.
	unrecordedSince atomic.Int64

	ready atomic.Bool
	// standby is set while this replica waits for the Lease: it is ready
	// to take over, with no cycle of its own.
	standby atomic.Bool
	// stalled, when set by Watch, fails /healthz.
	stalled func() error
	// stallLogged is set while a stall is reported, so that it is logged
	// once, with the goroutines' stacks.
	stallLogged atomic.Bool
	log         *slog.Logger
}

// Watch makes /healthz fail while l is stalled (Loop.Stalled with
// stallAfter) and exports the age of its last pass. The first failing
// /healthz of a stall logs it with every goroutine's stack, which is what
// a stall is found by.
func (m *Metrics) Watch(l *Loop, stallAfter time.Duration, log *slog.Logger) {
	m.stalled = func() error { return l.Stalled(stallAfter) }
	m.log = log
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ferry_last_pass_age_seconds", Help: "Seconds since the loop's last pass over the repository ended.",
	}, func() float64 { return time.Since(l.LastPass()).Seconds() }))
}

// StallAfter is the watchdog's bound for a loop that polls every interval
// and bounds each stage by timeout: two intervals and two stages (a poll
// and the previews) with room to spare.
func StallAfter(interval, timeout time.Duration) time.Duration {
	return 2*interval + 2*timeout + time.Minute
}

// health is /healthz: ok, or 503 with where the loop is stuck.
func (m *Metrics) health(w http.ResponseWriter, _ *http.Request) {
	if m.stalled != nil {
		if err := m.stalled(); err != nil {
			if m.stallLogged.CompareAndSwap(false, true) && m.log != nil {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				m.log.Error("the loop is stalled; /healthz fails until it moves", "error", err, "goroutines", string(buf))
			}
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		m.stallLogged.Store(false)
	}
	_, _ = w.Write([]byte("ok\n"))
}

// NewMetrics registers the metrics. counters adds gauges read from other
// parts when scraped, such as Git fetches and forge calls (name → read).
func NewMetrics(counters map[string]func() float64) *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry()}
	m.phases = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ferry_plan_phases", Help: "Phases of all plans by state, as of the last cycle.",
	}, []string{"state"})
	m.phase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ferry_plan_phase", Help: "1 for each plan's phase in its current state (one series per plan and phase), as of the last cycle.",
	}, []string{"plan", "phase", "state"})
	m.stepsRun = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ferry_steps_total", Help: "Step attempts by executor, action, target kind and outcome.",
	}, []string{"executor", "action", "kind", "outcome"})
	m.stepLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "ferry_step_duration_seconds", Help: "How long step attempts took, by executor, action and target kind.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
	}, []string{"executor", "action", "kind"})
	m.stepRoundTrip = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "ferry_step_latency_seconds", Help: "From a step's publication to its final result, by executor kind.",
		Buckets: prometheus.ExponentialBuckets(0.001, 1.5, 30),
	}, []string{"executor"})
	m.cycles = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ferry_cycles_total", Help: "Reconcile cycles by result.",
	}, []string{"result"})
	m.statusWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ferry_status_writes_total", Help: "Writes of the statuses (a commit to the status branch and the pull requests' comments) by result.",
	}, []string{"result"})
	unrecorded := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ferry_status_unrecorded_seconds", Help: "Seconds since the statuses' writes began to fail; 0 while the last one succeeded.",
	}, func() float64 {
		if since := m.unrecordedSince.Load(); since != 0 {
			return time.Since(time.Unix(0, since)).Seconds()
		}
		return 0
	})
	m.Registry.MustRegister(m.phases, m.phase, m.stepsRun, m.stepLatency, m.stepRoundTrip, m.cycles, m.statusWrites, unrecorded,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for name, read := range counters {
		m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: "Calls counted by " + name + "."}, read))
	}
	return m
}

// phaseStates are the states ferry_plan_phases counts, every one always
// exported (a state with no phase is 0, not absent, for alerts).
var phaseStates = []status.PhaseState{status.PhasePending, status.PhaseApproved, status.PhaseRunning, status.PhaseSucceeded,
	status.PhaseFailed, status.PhaseBlocked, status.PhaseRollingBack, status.PhaseRolledBack}

// ObservePhases sets the phase gauges from every plan's status: the count
// by state, and each plan's phase in its state (the series of its former
// state, and of plans and phases gone, removed).
func (m *Metrics) ObservePhases(statuses map[string]*status.PlanStatus) {
	counts := map[status.PhaseState]int{}
	seen := map[[2]string]bool{}
	if m.phaseStates == nil {
		m.phaseStates = map[[2]string]status.PhaseState{}
	}
	for plan, st := range statuses {
		for _, ph := range st.Phases {
			counts[ph.State]++
			key := [2]string{plan, ph.Name}
			seen[key] = true
			if old, ok := m.phaseStates[key]; ok && old != ph.State {
				m.phase.DeleteLabelValues(plan, ph.Name, string(old))
			}
			m.phaseStates[key] = ph.State
			m.phase.WithLabelValues(plan, ph.Name, string(ph.State)).Set(1)
		}
	}
	for key, state := range m.phaseStates {
		if !seen[key] {
			m.phase.DeleteLabelValues(key[0], key[1], string(state))
			delete(m.phaseStates, key)
		}
	}
	for _, s := range phaseStates {
		m.phases.WithLabelValues(string(s)).Set(float64(counts[s]))
	}
}

// ObserveResult counts a step attempt and its duration.
func (m *Metrics) ObserveResult(ev *events.ResultEvent) {
	action, kind := resultLabels(ev)
	m.stepsRun.WithLabelValues(string(ev.Executor), action, kind, string(ev.Outcome)).Inc()
	m.stepLatency.WithLabelValues(string(ev.Executor), action, kind).Observe(ev.Duration.Seconds())
}

// resultLabels are a result's action and target kind: from the event, or
// from its step key when an older executor left them out (a key that does
// not parse leaves them empty).
func resultLabels(ev *events.ResultEvent) (action, kind string) {
	action = string(ev.Action)
	if f := strings.Fields(ev.Target); len(f) > 0 {
		kind = f[0]
	}
	if action == "" || kind == "" {
		if _, a, t, err := step.ParseKey(ev.StepKey); err == nil {
			action, kind = cmp.Or(action, string(a)), cmp.Or(kind, t.Kind)
		}
	}
	return action, kind
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

// ObserveFlush counts a write of the statuses, and when they began to
// fail.
func (m *Metrics) ObserveFlush(err error) {
	if err == nil {
		m.statusWrites.WithLabelValues("ok").Inc()
		m.unrecordedSince.Store(0)
		return
	}
	m.statusWrites.WithLabelValues("error").Inc()
	m.unrecordedSince.CompareAndSwap(0, time.Now().UnixNano())
}

// Standby says whether this replica waits for another to give up the
// Lease: /readyz passes while it does, so that both replicas of a
// Deployment are Ready (a PodDisruptionBudget counts them, a Service sends
// webhooks to either) and its body says "standing by".
func (m *Metrics) Standby(on bool) { m.standby.Store(on) }

// Serve answers /metrics, /healthz (the loop is not stalled: see Watch) and
// /readyz (a cycle succeeded, or the replica stands by) on addr until ctx
// ends.
func (m *Metrics) Serve(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", m.health)
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case m.ready.Load():
			_, _ = w.Write([]byte("ok\n"))
		case m.standby.Load():
			_, _ = w.Write([]byte("standing by: another replica holds the Lease\n"))
		default:
			http.Error(w, "no successful cycle yet", http.StatusServiceUnavailable)
		}
	})
	if m.Profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	}
	// Every timeout set, so that a slow or silent client cannot hold a
	// connection for good; writing allows a CPU profile's default 30
	// seconds (/debug/pprof/profile refuses one longer than it).
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute}
	go func() {
		<-ctx.Done()
		// ctx is done: keep only its values for the shutdown's 5 seconds.
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
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
	m.stepRoundTrip.WithLabelValues(string(ev.Executor)).Observe(d.Seconds())
}
