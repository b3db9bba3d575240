package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ferry-dev/ferry/internal/testenv"
)

// fault is one kind of failure `make chaos` injects into a migration.
type fault struct {
	name string
	// inject does it and returns when the fault is over (the process
	// started again, the server answers again).
	inject func(ctx context.Context, w *world, run int) error
}

// outage is how long the Git remote refuses connections and GitHub fails.
const outage = 30 * time.Second

// faults are the kinds, in the order the runs take them.
var faults = []fault{
	{"kill -9 the reconciler", func(_ context.Context, w *world, _ int) error { return w.kill9("reconciler", time.Second) }},
	{"kill -9 an executor replica", func(_ context.Context, w *world, run int) error {
		return w.kill9(fmt.Sprintf("executor-%d", 1+run%executorReplicas), time.Second)
	}},
	{"restart the NATS server", func(_ context.Context, w *world, _ int) error { w.nats.Restart(w.r); return nil }},
	{"Git remote refuses connections for 30s", func(ctx context.Context, w *world, _ int) error {
		w.gitProxy.Refuse()
		sleep(ctx, outage)
		return w.gitProxy.Pass()
	}},
	{"GitHub answers 502, then 403 secondary rate limit, for 30s", func(ctx context.Context, w *world, _ int) error {
		sleep(ctx, time.Until(w.gh.Outage(outage)))
		return nil
	}},
	{"restart the management API server", func(_ context.Context, w *world, _ int) error { w.a.Mgmt.RestartAPIServer(w.r); return nil }},
}

// chaosRun is what one run of `make chaos` saw.
type chaosRun struct {
	n     int
	fault string
	// at is when the fault began, after the first pull request opened;
	// recovered is how long after it ended the reconciler ended a
	// successful pass again.
	at, recovered time.Duration
	took          time.Duration
	state         *endState
	diffs         []string
	err           error
}

// chaos runs the seed 000 migration once undisturbed and then runs times,
// each with one fault at a random moment, and compares each end state with
// the undisturbed one. It fails when a run did not finish, ended
// differently, did something twice or let a secret out.
func chaos(ctx context.Context, out *display, bin, logDir string, runs int, seed uint64, perRun time.Duration) error {
	rng := rand.New(rand.NewPCG(seed, seed))
	out.say("==> make chaos: %d runs of the seed 000 migration on the real backends and the real CAPI and CAPO managers (seed %d)", runs, seed)
	out.say("    layout: an external NATS server, `reconciler run --executors=false`, %d `reconciler executor` replicas; logs under %s", executorReplicas, logDir)
	baseline := chaosOnce(ctx, out, bin, logDir, 0, nil, 0, perRun)
	if baseline.err != nil {
		return fmt.Errorf("the undisturbed run failed: %w", baseline.err)
	}
	if problems := baseline.state.problems(); len(problems) > 0 {
		return fmt.Errorf("the undisturbed run: %s", strings.Join(problems, "; "))
	}
	results := []*chaosRun{baseline}
	for i := 1; i <= runs && ctx.Err() == nil; i++ {
		f := faults[(i-1)%len(faults)]
		at := time.Duration(rng.Int64N(int64(baseline.took) * 8 / 10))
		run := chaosOnce(ctx, out, bin, logDir, i, &f, at, perRun)
		if run.state != nil {
			run.diffs = baseline.state.diff(run.state)
		}
		results = append(results, run)
	}
	return report(out, results, runs)
}

// chaosOnce is one run in a world of its own, with f at at (none when f
// is nil), given up after timeout.
func chaosOnce(ctx context.Context, out *display, bin, logDir string, n int, f *fault, at, timeout time.Duration) *chaosRun {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	run := &chaosRun{n: n, fault: "none (the baseline)", at: at}
	if f != nil {
		run.fault = f.name
	}
	dir := filepath.Join(logDir, fmt.Sprintf("run-%02d", n))
	// Logs of an earlier chaos run would be scanned for secrets too.
	if err := os.RemoveAll(dir); err != nil {
		run.err = err
		return run
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		run.err = err
		return run
	}
	transcript, err := os.Create(filepath.Join(dir, "transcript.txt"))
	if err != nil {
		run.err = err
		return run
	}
	defer transcript.Close()
	runOut := newDisplay(transcript)
	out.say("==> run %d: %s", n, run.fault)
	r := testenv.NewProgram(func(format string, args ...any) { runOut.say("    "+format, args...) })
	run.err = r.Do(func() error {
		w, err := newWorld(ctx, r, runOut, bin, dir, external)
		if err != nil {
			return err
		}
		msgs := &recorder{}
		sub, err := w.nats.Conn.Subscribe(">", func(m *nats.Msg) { msgs.add(m.Subject, m.Data) })
		if err != nil {
			return err
		}
		defer func() { _ = sub.Unsubscribe() }()
		start := time.Now()
		injected := make(chan struct{})
		if f != nil {
			go func() {
				defer close(injected)
				sleep(ctx, at)
				runOut.say("==> fault: %s", f.name)
				if err := f.inject(ctx, w, n); err != nil {
					r.Errorf("fault %s: %v", f.name, err)
					return
				}
				ended := time.Now()
				run.recovered, err = w.recovered(ctx)
				if err != nil {
					r.Errorf("after %s: %v", f.name, err)
				}
				runOut.say("==> fault over at %s; a successful pass %s later", ended.Format(time.TimeOnly), run.recovered.Round(100*time.Millisecond))
			}()
		} else {
			close(injected)
		}
		if _, err := w.migrate(ctx); err != nil {
			return err
		}
		run.took = time.Since(start)
		select {
		case <-injected:
		case <-ctx.Done():
			return ctx.Err()
		}
		run.state, err = capture(ctx, w, msgs)
		return err
	})
	r.Close()
	switch {
	case run.err != nil:
		out.say("    ✗ failed: %v (transcript: %s)", run.err, transcript.Name())
	default:
		out.say("    ✓ migrated in %s%s; %d repeated effects; %d secret values looked for in %d KiB: %d found",
			run.took.Round(time.Second), recoveredText(run), len(run.state.repeated), run.state.values, run.state.scanned/1024, len(run.state.secrets))
	}
	return run
}

func recoveredText(run *chaosRun) string {
	if run.n == 0 {
		return ""
	}
	return fmt.Sprintf(" (fault at %s, recovered %s after it)", run.at.Round(time.Second), run.recovered.Round(100*time.Millisecond))
}

// recovered waits for the reconciler to end a successful pass after now
// and returns how long that took.
func (w *world) recovered(ctx context.Context) (time.Duration, error) {
	began := time.Now()
	before, _ := w.okCycles()
	for {
		if n, err := w.okCycles(); err == nil && n > before {
			return time.Since(began), nil
		}
		if time.Since(began) > 5*time.Minute {
			return time.Since(began), fmt.Errorf("no successful pass within 5m")
		}
		select {
		case <-ctx.Done():
			return time.Since(began), ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// okCycles reads ferry_cycles_total{result="ok"} from the reconciler's
// metrics (0 for a process that just started, -1 when it does not answer).
func (w *world) okCycles() (int, error) {
	resp, err := http.Get("http://" + w.metrics + "/metrics")
	if err != nil {
		return -1, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), `ferry_cycles_total{result="ok"} `); ok {
			n, err := strconv.ParseFloat(v, 64)
			return int(n), err
		}
	}
	return 0, sc.Err()
}

// recorder keeps every NATS message's subject and body.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) add(subject string, data []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, subject+" "+string(data))
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs)
}

// report prints the figures of a chaos run and fails when a run failed,
// ended differently, repeated an effect or let a secret out.
func report(out *display, results []*chaosRun, runs int) error {
	out.say("\n==> chaos: %d runs with a fault and one without", runs)
	failed, divergent, repeated, secrets := 0, 0, 0, 0
	var longest, slowest time.Duration
	kinds := map[string]int{}
	for _, run := range results {
		status := "ok"
		switch {
		case run.err != nil:
			failed++
			status = "FAILED: " + run.err.Error()
		case len(run.diffs) > 0:
			divergent++
			status = fmt.Sprintf("DIVERGED in %d lines", len(run.diffs))
		}
		if run.n > 0 {
			kinds[run.fault]++
			longest = max(longest, run.recovered)
			if run.err == nil {
				slowest = max(slowest, run.took-results[0].took)
			}
		}
		if run.state != nil {
			repeated += len(run.state.repeated)
			secrets += len(run.state.secrets)
		}
		out.say("    run %2d  %-58s took %-5s %s", run.n, run.fault+recoveredText(run), run.took.Round(time.Second), status)
		for _, d := range first(run.diffs, 10) {
			out.say("            %s", d)
		}
		if run.state != nil {
			for _, d := range first(run.state.repeated, 10) {
				out.say("            repeated: %s", d)
			}
			for _, d := range first(run.state.secrets, 10) {
				out.say("            secret: %s", d)
			}
		}
	}
	for _, f := range faults {
		out.say("    %-60s %d runs", f.name, kinds[f.name])
	}
	out.say("    failed runs %d, divergent end states %d, repeated effects %d, secrets found %d", failed, divergent, repeated, secrets)
	out.say("    longest time from a fault's end to a successful pass: %s; most time a fault added to the migration: %s (the undisturbed run took %s)",
		longest.Round(100*time.Millisecond), slowest.Round(time.Second), results[0].took.Round(time.Second))
	if failed+divergent+repeated+secrets > 0 {
		return fmt.Errorf("%d failed runs, %d divergent end states, %d repeated effects, %d secrets found", failed, divergent, repeated, secrets)
	}
	return nil
}

func first(list []string, n int) []string { return list[:min(n, len(list))] }

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
