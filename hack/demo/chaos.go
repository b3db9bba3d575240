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

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// fault is one kind of failure `make chaos` injects into a migration.
type fault struct {
	name string
	// drain: the fault strikes while a cutover drain runs
	// (waitDrainStep), not at a random moment.
	drain bool
	// undo: the fault strikes when the status first shows a phase
	// RollingBack (waitRollingBack), not at a random moment.
	undo bool
	// inject does it and returns when the fault is over (the process
	// started again, the server answers again).
	inject func(ctx context.Context, w *world, run int) error
}

// outage is how long the Git remote refuses connections and the forge
// fails.
const outage = 30 * time.Second

// adoptFaults are the adopt runs' faults on the forge of kind and layout
// lay, in the order the runs take them. Two depend on the forge: on
// Gitea, Git and the API share one port, so the proxy refuses both, and
// the forge's outage is Gitea killed and started again; on the GitHub
// stand-in the proxy refuses Git only, and the outage is the stand-in's
// 502 and 403 answers. The cluster layout's own faults (clusterFaults)
// come first, in place of the NATS server's restart and the reconciler's
// kill.
func adoptFaults(kind string, lay layout) []fault {
	refuse, down := "Git remote refuses connections for 30s", "GitHub stand-in answers 502, then 403 secondary rate limit, for 30s"
	if kind == forgeGitea {
		refuse, down = "Gitea's port refuses ferry's connections (Git and API) for 30s", "kill -9 Gitea, start it again after 30s"
	}
	killExecutor := fault{name: "kill -9 an executor replica", inject: func(_ context.Context, w *world, run int) error {
		return w.kill9(time.Second, fmt.Sprintf("executor-%d", 1+run%w.layout.executors()))
	}}
	others := []fault{
		{name: refuse, inject: func(ctx context.Context, w *world, _ int) error {
			w.gitProxy.Refuse()
			sleep(ctx, outage)
			return w.gitProxy.Pass()
		}},
		{name: down, inject: func(ctx context.Context, w *world, _ int) error { return w.forge.outage(ctx, outage) }},
		{name: "restart the management API server", inject: func(_ context.Context, w *world, _ int) error { w.fx.cloud.Mgmt.RestartAPIServer(w.r); return nil }},
	}
	if lay == cluster {
		return slices.Concat(clusterFaults, []fault{killExecutor}, others)
	}
	return slices.Concat([]fault{
		{name: "kill -9 the reconciler", inject: killReconciler},
		killExecutor,
		{name: "restart the NATS server", inject: func(_ context.Context, w *world, _ int) error { w.nats.Restart(w.r); return nil }},
	}, others)
}

// clusterFaults are the faults of the cluster layout: a NATS node lost or
// cut off, the leading reconciler killed, most executors killed.
var clusterFaults = []fault{
	{name: "stop the NATS node that leads FERRY_STEPS (in process: shut down, store kept), start it again after 30s", inject: func(ctx context.Context, w *world, _ int) error {
		c := w.natsCluster
		i := c.StreamLeader(w.r, events.StreamSteps)
		w.out.say("==> node %s leads %s", c.Name(i), events.StreamSteps)
		c.Stop(w.r, i)
		sleep(ctx, outage)
		c.Restart(w.r, i)
		return nil
	}},
	{name: "partition one NATS node from the other two for 30s", inject: func(ctx context.Context, w *world, run int) error {
		c := w.natsCluster
		i := run % c.Len()
		w.out.say("==> node %s loses its routes to the others", c.Name(i))
		c.Partition(w.r, i)
		sleep(ctx, outage)
		c.Heal(w.r, i)
		return nil
	}},
	{name: "kill -9 the leading reconciler", inject: killReconciler},
	{name: "kill -9 two of three executor replicas at once", inject: func(_ context.Context, w *world, run int) error {
		n := w.layout.executors()
		return w.kill9(time.Second, fmt.Sprintf("executor-%d", 1+run%n), fmt.Sprintf("executor-%d", 1+(run+1)%n))
	}},
}

// leaseTakeover bounds the wait for a standby to take the Lease over from
// a killed leader: the Lease's 15 s and the election's 2 s retry, with
// room for a loaded machine.
const leaseTakeover = time.Minute

// killReconciler kills the reconciler that leads (the only one, but on
// the cluster layout) with SIGKILL and starts it again after a second. On
// the cluster layout it stays down, as a lost node's pod does, until the
// other replica holds the Lease, which must happen within the Lease's
// duration and the election's retry: the killed one would otherwise take
// its own Lease back at once under the same identity.
func killReconciler(ctx context.Context, w *world, _ int) error {
	name, err := w.leading(ctx)
	if err != nil {
		return err
	}
	if w.layout != cluster {
		return w.kill9(time.Second, name)
	}
	w.out.say("==> %s holds the Lease", name)
	killed := time.Now()
	if err := w.kill(name); err != nil {
		return err
	}
	var holder string
	takeover, cancel := context.WithTimeout(ctx, leaseTakeover)
	defer cancel()
	err = w.out.wait(takeover, "the other reconciler to take the Lease over", func() (bool, string) {
		holder, err = w.leading(takeover)
		if err != nil {
			return false, err.Error()
		}
		return holder != name, holder + " holds it"
	})
	if err != nil {
		return err
	}
	w.out.say("==> %s took the Lease over %s after the kill", holder, time.Since(killed).Round(100*time.Millisecond))
	return w.startProc(name, nil)
}

// chaosRun is what one run of `make chaos` saw.
type chaosRun struct {
	n     int
	sc    *scenario
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

// chaos runs each scenario that the runs take (chaosPlan) once
// undisturbed, and then runs migrations, each with one fault (at a random
// moment, during a cutover drain or during the undo of a rollback), and
// compares each end state with its scenario's undisturbed one. It fails
// when a run did not finish, ended differently, did something twice, let
// a secret out, broke the cutover's promises or left the world otherwise
// than before its rollback.
//
// The runs are numbered from first: run n takes the scenario and fault
// chaosPlan gives run n in a batch from 1, so that a short batch (CI's)
// can take a later run, a rollback run say.
func chaos(ctx context.Context, out *display, bin, logDir, kind string, lay layout, only string, first, runs int, seed uint64, perRun time.Duration) error {
	if first < 1 {
		return fmt.Errorf("--chaos-from %d: runs are numbered from 1", first)
	}
	rng := rand.New(rand.NewPCG(seed, seed))
	faults := chaosFaults{adopt: adoptFaults(kind, lay), drain: drainFaults, undo: undoFaults}
	if only != "" {
		var ok bool
		if faults, ok = faults.only(only); !ok {
			return fmt.Errorf("--fault %q: no fault on %s has it in its name", only, kind)
		}
	}
	scs, fs := chaosPlan(first+runs-1, faults)
	scs, fs = scs[first-1:], fs[first-1:]
	forgeText := "a real Gitea"
	if kind == forgeGitHub {
		forgeText = "the GitHub stand-in (not GitHub)"
	}
	out.say("==> make chaos: %d migrations with a fault each on the real backends, the real CAPI and CAPO managers and %s (seed %d)", runs, forgeText, seed)
	out.say("    runs %d, %d, … migrate the replace scenario (seed 003) with a fault during a cutover drain", replaceEvery, 2*replaceEvery)
	out.say("    runs %d, %d, … migrate the adopt scenario and roll it back (spec.rollback.to: none) with a kill -9 during the undo, compared with the world before", rollbackFirst, rollbackFirst+rollbackEvery)
	out.say("    the others migrate the adopt scenario (seed 000) with a fault at a random moment")
	out.say("    layout: %s; logs under %s", lay.describe(), logDir)
	baselines := map[*scenario]*chaosRun{}
	var results []*chaosRun
	for _, sc := range scenarios {
		// Each scenario the runs take has its baseline; a batch of no
		// runs has the adopt scenario's.
		if !slices.Contains(scs, sc) && (len(scs) > 0 || sc.name != "adopt") {
			continue
		}
		base := chaosOnce(ctx, out, bin, logDir, kind, lay, 0, sc, nil, 0, perRun)
		if base.err != nil {
			return fmt.Errorf("the undisturbed %s run failed: %w", sc.name, base.err)
		}
		if problems := base.state.problems(); len(problems) > 0 {
			return fmt.Errorf("the undisturbed %s run: %s", sc.name, strings.Join(problems, "; "))
		}
		baselines[sc] = base
		results = append(results, base)
	}
	for i := range runs {
		if ctx.Err() != nil {
			break
		}
		f, base := fs[i], baselines[scs[i]]
		at := time.Duration(rng.Int64N(int64(base.took) * 8 / 10))
		run := chaosOnce(ctx, out, bin, logDir, kind, lay, first+i, scs[i], &f, at, perRun)
		if run.state != nil {
			run.diffs = base.state.diff(run.state)
		}
		results = append(results, run)
	}
	return report(out, results, baselines, runs, faults)
}

// chaosFaults are the faults of each kind of chaos run: adopt runs',
// replace runs' (during a cutover drain) and rollback runs' (during an
// undo).
type chaosFaults struct {
	adopt, drain, undo []fault
}

// only keeps, of each kind of run, the faults whose name holds text; a
// kind with none keeps all of its own. It reports whether any fault
// held the text.
func (c chaosFaults) only(text string) (chaosFaults, bool) {
	matched := false
	keep := func(fs []fault) []fault {
		kept := slices.DeleteFunc(slices.Clone(fs), func(f fault) bool { return !strings.Contains(f.name, text) })
		if len(kept) == 0 {
			return fs
		}
		matched = true
		return kept
	}
	c.adopt, c.drain, c.undo = keep(c.adopt), keep(c.drain), keep(c.undo)
	return c, matched
}

func (c chaosFaults) all() []fault { return slices.Concat(c.adopt, c.drain, c.undo) }

// chaosPlan is which scenario and fault each chaos run takes: every
// replaceEvery-th run the replace scenario with the drain faults in turn;
// runs rollbackFirst, rollbackFirst+rollbackEvery, … the rollback
// scenario with the undo faults in turn; the others the adopt scenario
// with the adopt faults in turn.
func chaosPlan(runs int, faults chaosFaults) (scs []*scenario, fs []fault) {
	adopt, _ := scenarioNamed("adopt")
	replace, _ := scenarioNamed("replace")
	rollback, _ := scenarioNamed("rollback")
	a, r, u := 0, 0, 0
	for i := 1; i <= runs; i++ {
		switch {
		case i%replaceEvery == 0:
			scs, fs = append(scs, replace), append(fs, faults.drain[r%len(faults.drain)])
			r++
		case i%rollbackEvery == rollbackFirst%rollbackEvery:
			scs, fs = append(scs, rollback), append(fs, faults.undo[u%len(faults.undo)])
			u++
		default:
			scs, fs = append(scs, adopt), append(fs, faults.adopt[a%len(faults.adopt)])
			a++
		}
	}
	return scs, fs
}

// executorLogs calls fn with each executor replica's name and the lines
// of its current log (since its latest start).
func (w *world) executorLogs(fn func(name string, lines []string)) {
	for i := 1; i <= w.layout.executors(); i++ {
		name := fmt.Sprintf("executor-%d", i)
		w.mu.Lock()
		p := w.procs[name]
		w.mu.Unlock()
		if p == nil {
			continue
		}
		if data, err := os.ReadFile(w.logFile(name, p.start)); err == nil {
			fn(name, strings.Split(string(data), "\n"))
		}
	}
}

// executorRunning is the executor replica whose log shows a step begun
// and not ended whose "running step" line match accepts, and that line;
// "" when none does.
func (w *world) executorRunning(match func(line string) bool) (name, running string) {
	w.executorLogs(func(replica string, lines []string) {
		id, line := "", ""
		for _, l := range lines {
			switch {
			case strings.Contains(l, `msg="running step"`) && match(l):
				id, line = logField(l, "step"), l
			case id != "" && strings.Contains(l, `msg="step `) && logField(l, "step") == id:
				line = ""
			}
		}
		if line != "" && name == "" {
			name, running = replica, line
		}
	})
	return name, running
}

// chaosOnce is one run of scenario sc in a world of its own on the forge
// of kind, with f at at, or at its moment (a drain, an undo), none when f
// is nil, given up after timeout.
func chaosOnce(ctx context.Context, out *display, bin, logDir, kind string, lay layout, n int, sc *scenario, f *fault, at, timeout time.Duration) *chaosRun {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	run := &chaosRun{n: n, sc: sc, fault: "none (the baseline)", at: at}
	if f != nil {
		run.fault = f.name
	}
	dir := filepath.Join(logDir, fmt.Sprintf("run-%02d-%s", n, sc.name))
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
	out.say("==> run %d (%s): %s", n, sc.name, run.fault)
	r := testenv.NewProgram(func(format string, args ...any) { runOut.say("    "+format, args...) })
	run.err = r.Do(func() error {
		w, err := newWorld(ctx, r, runOut, bin, dir, lay, sc, kind)
		if err != nil {
			return err
		}
		err = run.migrate(ctx, w, f)
		if err != nil && ctx.Err() != nil {
			// Timed out: say what Cluster API shows, for the CI log.
			diagCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = fmt.Errorf("%w; Cluster API: %s", err, w.capiState(diagCtx))
		}
		return err
	})
	if run.err != nil {
		// Failed, the managers keep their logs and say their last errors
		// in the transcript, which CI does not keep: show them here.
		r.Errorf("%v", run.err)
	}
	r.Close()
	switch {
	case run.err != nil:
		out.say("    ✗ failed: %v (transcript: %s)", run.err, transcript.Name())
		if errs := managerErrors(transcript.Name(), 60); errs != "" {
			out.say("    the controller managers' last errors:\n%s", errs)
		}
	default:
		what := "migrated"
		if sc.rollback {
			what = "migrated and rolled back"
		}
		out.say("    ✓ %s in %s%s; %d repeated effects; %d secret values looked for in %d KiB: %d found; %d cutover or rollback violations",
			what, run.took.Round(time.Second), recoveredText(run), len(run.state.repeated), run.state.values, run.state.scanned/1024, len(run.state.secrets), len(run.state.violations))
	}
	return run
}

// migrate runs the migration in w with fault f (none when nil), and in
// a rollback scenario rolls it back, and captures the end state.
func (run *chaosRun) migrate(ctx context.Context, w *world, f *fault) error {
	msgs := &recorder{}
	sub, err := w.natsConn.Subscribe(">", func(m *nats.Msg) { msgs.add(m.Subject, m.Data) })
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	var before *worldLines
	if run.sc.rollback {
		if before, err = w.recordWorld(ctx); err != nil {
			return err
		}
	}
	start := time.Now()
	injected := make(chan error, 1)
	// moment ends the wait for a drain's or an undo's moment; a fault
	// that has struck goes on under ctx.
	moment, stopWaiting := context.WithCancel(ctx)
	defer stopWaiting()
	if f != nil {
		go func() { injected <- run.inject(ctx, moment, w, f, start) }()
	} else {
		injected <- nil
	}
	if _, err := w.migrate(ctx); err != nil {
		return err
	}
	prs := len(w.sc.phases)
	if before != nil {
		if err := w.rollback(ctx); err != nil {
			return err
		}
		prs++
	}
	run.took = time.Since(start)
	// The drains and the undo are over: a fault waiting for them that
	// has not struck yet never will.
	stopWaiting()
	select {
	case err := <-injected:
		if err != nil {
			return err
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	if before != nil {
		w.out.say("==> waiting %s for the controllers to settle before reading the end state", undoneSettle)
		sleep(ctx, undoneSettle)
	}
	if run.state, err = capture(ctx, w, msgs, prs); err != nil {
		return err
	}
	if before != nil {
		return w.captureRolledBack(ctx, before, run.state)
	}
	return nil
}

// inject waits for the fault's moment (until moment ends, for a drain or
// an undo), injects it and measures the recovery.
func (run *chaosRun) inject(ctx, moment context.Context, w *world, f *fault, start time.Time) error {
	switch {
	case f.drain:
		if err := w.waitDrainStep(moment); err != nil {
			return fmt.Errorf("fault %s never struck: %w", f.name, err)
		}
		run.at = time.Since(start)
	case f.undo:
		if err := w.waitRollingBack(moment); err != nil {
			return fmt.Errorf("fault %s never struck: %w", f.name, err)
		}
		run.at = time.Since(start)
	default:
		sleep(ctx, run.at)
	}
	w.out.say("==> fault: %s", f.name)
	if err := f.inject(ctx, w, run.n); err != nil {
		return fmt.Errorf("fault %s: %w", f.name, err)
	}
	ended := time.Now()
	var err error
	run.recovered, err = w.recovered(ctx)
	if err != nil {
		return fmt.Errorf("after %s: %w", f.name, err)
	}
	w.out.say("==> fault over at %s; a successful pass %s later", ended.Format(time.TimeOnly), run.recovered.Round(100*time.Millisecond))
	return nil
}

func recoveredText(run *chaosRun) string {
	if run.n == 0 {
		return ""
	}
	return fmt.Sprintf(" (fault at %s, recovered %s after it)", run.at.Round(time.Second), run.recovered.Round(100*time.Millisecond))
}

// recovered waits for a reconciler to end a successful pass after now
// (on the cluster layout, either: the one that leads) and returns how long
// that took.
func (w *world) recovered(ctx context.Context) (time.Duration, error) {
	began := time.Now()
	before := w.okCycles()
	for {
		for name, now := range w.okCycles() {
			if b, ok := before[name]; now.n > 0 && (!ok || b.pid != now.pid || now.n > b.n) {
				return time.Since(began), nil
			}
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

// cycles is how many successful passes a reconciler process has ended.
type cycles struct{ pid, n int }

// okCycles reads ferry_cycles_total{result="ok"} from the metrics of each
// reconciler that answers (0 for one that just started).
func (w *world) okCycles() map[string]cycles {
	out := map[string]cycles{}
	for _, name := range w.layout.reconcilers() {
		w.mu.Lock()
		p := *w.procs[name]
		w.mu.Unlock()
		resp, err := http.Get("http://" + p.metrics + "/metrics")
		if err != nil {
			continue
		}
		c := cycles{pid: p.pid}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), `ferry_cycles_total{result="ok"} `); ok {
				n, _ := strconv.ParseFloat(v, 64)
				c.n = int(n)
			}
		}
		resp.Body.Close()
		if sc.Err() == nil {
			out[name] = c
		}
	}
	return out
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
// ended differently, repeated an effect, let a secret out or broke a
// promise of the cutover or the rollback.
func report(out *display, results []*chaosRun, baselines map[*scenario]*chaosRun, runs int, faults chaosFaults) error {
	out.say("\n==> chaos: %d runs with a fault and %d without", runs, len(baselines))
	var t tally
	type kind struct {
		runs    int
		longest time.Duration
	}
	kinds := map[string]*kind{}
	for _, f := range faults.all() {
		kinds[f.name] = &kind{}
	}
	for _, run := range results {
		t.add(out, run, baselines[run.sc])
		if k := kinds[run.fault]; run.n > 0 && k != nil {
			k.runs++
			k.longest = max(k.longest, run.recovered)
		}
	}
	out.say("    by fault: runs, and the longest time from the fault's end to a successful pass")
	for _, f := range faults.all() {
		k := kinds[f.name]
		longest := "-"
		if k.runs > 0 {
			longest = k.longest.Round(100 * time.Millisecond).String()
		}
		out.say("    %-100s %2d runs  %s", f.name, k.runs, longest)
	}
	out.say("    failed runs %d, divergent end states %d, repeated effects %d, secrets found %d, cutover or rollback violations %d",
		t.failed, t.divergent, t.repeated, t.secrets, t.violations)
	var took []string
	for _, sc := range scenarios {
		if b := baselines[sc]; b != nil {
			took = append(took, fmt.Sprintf("%s %s", sc.name, b.took.Round(time.Second)))
		}
	}
	out.say("    longest time from a fault's end to a successful pass: %s; most time a fault added to the migration: %s (the undisturbed runs took %s)",
		t.longest.Round(100*time.Millisecond), t.slowest.Round(time.Second), strings.Join(took, ", "))
	if t.failed+t.divergent+t.repeated+t.secrets+t.violations > 0 {
		return fmt.Errorf("%d failed runs, %d divergent end states, %d repeated effects, %d secrets found, %d cutover or rollback violations",
			t.failed, t.divergent, t.repeated, t.secrets, t.violations)
	}
	return nil
}

// tally adds up the chaos runs' figures.
type tally struct {
	failed, divergent, repeated, secrets, violations int
	longest, slowest                                 time.Duration
}

// add prints one run's line and details, and counts them; base is the
// undisturbed run of its scenario.
func (t *tally) add(out *display, run, base *chaosRun) {
	status := "ok"
	switch {
	case run.err != nil:
		t.failed++
		status = "FAILED: " + run.err.Error()
	case len(run.diffs) > 0:
		t.divergent++
		status = fmt.Sprintf("DIVERGED in %d lines", len(run.diffs))
	}
	if run.n > 0 {
		t.longest = max(t.longest, run.recovered)
		if run.err == nil {
			t.slowest = max(t.slowest, run.took-base.took)
		}
	}
	out.say("    run %2d  %-8s %-58s took %-5s %s", run.n, run.sc.name, run.fault+recoveredText(run), run.took.Round(time.Second), status)
	for _, d := range first(run.diffs, 10) {
		out.say("            %s", d)
	}
	if run.state == nil {
		return
	}
	t.repeated += len(run.state.repeated)
	t.secrets += len(run.state.secrets)
	t.violations += len(run.state.violations)
	for _, d := range first(run.state.repeated, 10) {
		out.say("            repeated: %s", d)
	}
	for _, d := range first(run.state.secrets, 10) {
		out.say("            secret: %s", d)
	}
	for _, d := range first(run.state.violations, 10) {
		out.say("            violation: %s", d)
	}
}

func first(list []string, n int) []string { return list[:min(n, len(list))] }

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// managerErrors is what the transcript at path says from the first
// manager's last errors on, at most n lines: the managers' logs end a
// failed run's transcript.
func managerErrors(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	_, rest, ok := strings.Cut(string(data), "testenv: ")
	for ok && !strings.Contains(strings.SplitN(rest, "\n", 2)[0], "'s log is") {
		_, rest, ok = strings.Cut(rest, "testenv: ")
	}
	if !ok {
		return ""
	}
	lines := strings.Split(strings.TrimRight(rest, "\n"), "\n")
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
