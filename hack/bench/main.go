package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/memlimit"
	"github.com/ferry-dev/ferry/internal/reconciler"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/status/statusfile"
	"github.com/ferry-dev/ferry/internal/testing/fakegithub"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// options are the command's flags.
type options struct {
	plans, workers   int
	reconciler       string
	interval, idle   time.Duration
	kubectl          string
	baselinePlans    int
	baselineParallel int
	// containerMemory, when set, runs each of ferry's processes as in a
	// container of that memory limit (GOMEMLIMIT at memlimit.Share of it,
	// as the reconciler sets it from its cgroup).
	containerMemory string
	// runs are the layouts that --layout runs, in order.
	runs []layout
}

func main() {
	var o options
	flag.IntVar(&o.plans, "plans", 100, "clusters (plans) to migrate at once")
	flag.IntVar(&o.workers, "workers", 2, "worker nodes per cluster (more workers, more steps per plan)")
	flag.StringVar(&o.reconciler, "reconciler", "", "the reconciler binary to measure (default: build ./cmd/reconciler into bin/bench/reconciler first, as make image does)")
	flag.DurationVar(&o.interval, "interval", 30*time.Second, "the reconciler's --interval")
	flag.DurationVar(&o.idle, "idle", time.Minute, "how long to measure idleness")
	flag.StringVar(&o.kubectl, "kubectl", "", "the baseline's kubectl (default: Debian's, where hack/kubectl.sh puts it)")
	flag.IntVar(&o.baselinePlans, "baseline-plans", -1, "clusters the kubectl baseline migrates, 0 for no baseline (default: plans, at most 100)")
	flag.IntVar(&o.baselineParallel, "baseline-parallel", 10, "baseline scripts running at once")
	flag.StringVar(&o.containerMemory, "container-memory", "", "run each of ferry's processes as in a container with this memory limit (e.g. 300Mi): GOMEMLIMIT at 80% of it, as the reconciler sets it from its cgroup (default: no limit)")
	layoutName := flag.String("layout", "single", "how ferry's processes run: single (reconciler run with executors in process and its embedded NATS server, one copy of each stream) or cluster (the single run, then the same fleet on a fresh world with a three-node NATS cluster, R3 streams, reconciler run --executors=false and three reconciler executor replicas)")
	out := flag.String("out", "", "JSON file for the figures of every run (default bin/bench-<plans>.json)")
	timeout := flag.Duration("timeout", 90*time.Minute, "give up after this long (both runs of --layout cluster, with the baseline, on a loaded machine)")
	flag.Parse()
	if *out == "" {
		*out = fmt.Sprintf("bin/bench-%d.json", o.plans)
	}
	var err error
	if o.runs, err = runsOf(*layoutName); err == nil {
		err = o.resolveBaseline()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(2)
	}

	interrupted, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(interrupted, *timeout)
	defer cancel()
	start := time.Now()
	logf := func(format string, args ...any) {
		fmt.Printf("[%6.1fs] "+format+"\n", append([]any{time.Since(start).Seconds()}, args...)...)
	}
	rep, err := runAll(ctx, logf, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
	printTable(os.Stdout, rep)
	data, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(*out, append(data, '\n'), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("figures written to %s\n", *out)
}

// resolveBaseline applies the baseline flags' defaults and checks, before
// anything starts, that the baseline's kubectl runs.
func (o *options) resolveBaseline() error {
	if o.baselinePlans < 0 {
		o.baselinePlans = min(o.plans, 100)
	}
	switch {
	case o.baselinePlans == 0:
		return nil
	case o.baselinePlans > o.plans:
		return fmt.Errorf("--baseline-plans %d: the baseline's clusters are twins of ferry's, and there are %d (--plans)", o.baselinePlans, o.plans)
	case o.baselineParallel < 1:
		return fmt.Errorf("--baseline-parallel %d: at least one script must run", o.baselineParallel)
	}
	if o.kubectl == "" {
		path, err := exec.Command("hack/kubectl.sh", "--path").CombinedOutput()
		if err != nil {
			return fmt.Errorf("find Debian's kubectl with hack/kubectl.sh --path (run from the repository's root): %w: %s", err, path)
		}
		o.kubectl = strings.TrimSpace(string(path))
		if _, err := os.Stat(o.kubectl); err != nil {
			return fmt.Errorf("the baseline's kubectl (Debian's kubernetes-client) is not in %s: run hack/kubectl.sh, or pass --kubectl, or --baseline-plans 0 for no baseline", o.kubectl)
		}
	}
	if out, err := exec.Command(o.kubectl, "version", "--client").CombinedOutput(); err != nil {
		return fmt.Errorf("--kubectl %s does not run: %w %s", o.kubectl, err, bytes.TrimSpace(out))
	}
	return nil
}

// runAll builds the reconciler, unless --reconciler names one, and makes
// the runs of --layout in turn, each in a world of its own that is torn
// down before the next starts, but the single run's, which the kubectl
// baseline uses last.
func runAll(ctx context.Context, logf func(string, ...any), o options) (*Report, error) {
	if o.reconciler == "" {
		// A binary left from an older build would measure older code. It
		// is built as the image's is (make image): static, stripped; what
		// of the binary is read into memory counts in its RSS.
		o.reconciler = "bin/bench/reconciler"
		logf("building ./cmd/reconciler into %s as make image does", o.reconciler)
		build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", o.reconciler, "./cmd/reconciler")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build the reconciler: %w\n%s", err, out)
		}
	}
	bin, err := filepath.Abs(o.reconciler)
	if err != nil {
		return nil, err
	}
	rep := &Report{}
	// The kubectl baseline runs last, in the single run's world, which
	// stays up meanwhile with its reconciler and controller stand-ins
	// stopped: the runs of ferry follow each other, so that they compare
	// under the same load of the machine as far as may be.
	var pending *baseline
	var pendingWorld *testenv.Program
	defer func() {
		if pendingWorld != nil {
			pendingWorld.Close()
		}
	}()
	for _, lay := range o.runs {
		logf("layout %s", lay.name)
		p := testenv.NewProgram(func(format string, args ...any) { logf("  "+format, args...) })
		var res *Result
		var b *baseline
		err := p.Do(func() (err error) {
			res, b, err = run(ctx, p, logf, o, bin, lay)
			return err
		})
		if err != nil || b == nil {
			p.Close()
		} else {
			pending, pendingWorld = b, p
		}
		if err != nil {
			return nil, fmt.Errorf("layout %s: %w", lay.name, err)
		}
		rep.Runs = append(rep.Runs, res)
	}
	if len(rep.Runs) == 2 {
		rep.ClusterCost = layoutCost(rep.Runs[0], rep.Runs[1])
	}
	if pending == nil {
		return rep, nil
	}
	res, p := rep.Runs[0], pendingWorld
	err = p.Do(func() (err error) {
		testenv.StartControllerStandIns(quiet{p}, pending.mgmt, 0)
		res.Baseline, err = pending.run(ctx, p, logf)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("kubectl baseline: %w", err)
	}
	res.Baseline.FerrySpeedup = res.Baseline.SecondsPerPlan / (res.WallSeconds / float64(res.Plans))
	return rep, nil
}

// run migrates the fleet once, with ferry's processes in layout lay. After
// the single layout's run, unless --baseline-plans is 0, it stops ferry
// and the controller stand-ins and returns the kubectl baseline to run in
// the same world.
func run(ctx context.Context, p *testenv.Program, logf func(string, ...any), o options, bin string, lay layout) (*Result, *baseline, error) {
	n, interval, idle := o.plans, o.interval, o.idle
	logf("starting the management API server and the one that stands for every workload cluster")
	mgmt := testenv.StartKube(p)
	workload := testenv.StartKube(p)
	proxy, err := startWorkloadProxy(workload)
	if err != nil {
		return nil, nil, err
	}
	p.Cleanup(proxy.srv.Close)
	cloud := newCloudStandIn()
	p.Cleanup(cloud.close)

	logf("creating %d clusters to adopt (%d nodes each)", n, o.workers+1)
	f := &fleet{namespace: "fleet", prefix: "c", workers: o.workers}
	if err := f.create(p, mgmt, workload, proxy, cloud, n); err != nil {
		return nil, nil, err
	}
	if err := createIgnoreExists(ctx, mgmt.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ferry-system"}}); err != nil {
		return nil, nil, err
	}
	if err := createIgnoreExists(ctx, mgmt.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ferry-system", Name: "openstack-credentials"},
		Data: map[string][]byte{"clouds.yaml": cloud.cloudsYAML()}}); err != nil {
		return nil, nil, err
	}
	// The stand-ins poll: they are stopped with ferry when the world
	// waits for the baseline.
	standIns := testenv.NewProgram(p.Logf)
	p.Cleanup(standIns.Close)
	testenv.StartControllerStandIns(quiet{standIns}, mgmt, 0)

	files := map[string]string{"manifests/ccm.yaml": testenv.CCMManifest}
	for i := range n {
		files["plans/"+f.clusterName(i)+".yaml"] = f.plan(i, `""`)
	}
	seed := testenv.SeedDir(p, files)
	g := testenv.StartGit(p, seed)
	gh := fakegithub.New("acme", "fleet", "bench-token")
	p.Cleanup(gh.Close)

	dir := p.TempDir()
	for name, content := range map[string]string{"kubeconfig": string(mgmt.Kubeconfig(p)), "token": gh.Token, "secret": "bench-secret"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return nil, nil, err
		}
	}
	hook, metrics := testenv.FreeAddr(p), testenv.FreeAddr(p)
	args := []string{"run", "--repo", g.URL, "--kubeconfig", filepath.Join(dir, "kubeconfig"), "--data-dir", filepath.Join(dir, "data"),
		"--interval", interval.String(), "--webhook-addr", hook, "--webhook-secret-file", filepath.Join(dir, "secret"),
		"--metrics-addr", metrics, "--forge", "github", "--forge-url", gh.URL, "--forge-repo", "acme/fleet", "--forge-token-file", filepath.Join(dir, "token"), "--pprof"}
	logPrefix := filepath.Join("bin", fmt.Sprintf("bench-%d", n))
	if lay != single {
		logPrefix += "-" + lay.name
	}
	var env []string
	var limitMiB float64
	if o.containerMemory != "" {
		q, err := resource.ParseQuantity(o.containerMemory)
		if err != nil {
			return nil, nil, fmt.Errorf("--container-memory %q: %w", o.containerMemory, err)
		}
		limit := memlimit.Of(q.Value())
		limitMiB = float64(limit) / (1 << 20)
		env = append(env, fmt.Sprintf("GOMEMLIMIT=%d", limit))
		logf("each of ferry's processes runs as in a container of %s: GOMEMLIMIT=%.0fMiB", o.containerMemory, limitMiB)
	}
	l := launch{bin: bin, run: args, kubeconfig: filepath.Join(dir, "kubeconfig"), repo: g.URL, dir: dir, logPrefix: logPrefix, env: env}
	procs, err := l.start(ctx, p, logf, lay)
	if err != nil {
		return nil, nil, err
	}
	pid := procs.reconciler
	scrape := func() map[string]float64 { return scrapeMetrics("http://" + metrics + "/metrics") }

	reader := reconciler.GitStatusStore{Git: &gitsource.Branch{URL: g.URL, Name: statusfile.DefaultBranch, CacheDir: filepath.Join(dir, "status-reader")}}
	logf("waiting for the first status of every plan")
	if err := waitFor(ctx, time.Second, func() bool {
		all, err := reader.ReadAll(ctx)
		return err == nil && len(all) == n
	}); err != nil {
		return nil, nil, fmt.Errorf("first statuses: %w", err)
	}

	// With a forge, ferry acts only on approvals that a merged pull
	// request made. The pull request's previews are not timed.
	repo := testenv.NewPlansRepo(p, g, gh)
	repo.WebhookURL, repo.WebhookSecret = "http://"+hook+"/", []byte("bench-secret")
	approve := map[string]string{}
	for i := range n {
		approve["plans/"+f.clusterName(i)+".yaml"] = f.plan(i, "workers")
	}
	logf("opening a pull request that approves phase workers (and those before it) of all %d plans", n)
	repo.OpenPR(1, "Approve the fleet's migration", "alice", approve)
	settleGitHub(ctx, gh, 5*time.Second, 2*time.Minute)

	before := scrape()
	cpu0, execCPU0 := procs.cpu()
	bench0 := cpuSeconds(os.Getpid())
	ghBefore, cloudBefore, proxyBefore := len(gh.Calls("")), cloud.requests.Load(), proxy.requests.Load()
	logf("merging the pull request: the clock starts")
	t0 := time.Now()
	repo.MergePR(1, "bob")
	var done int
	err = waitFor(ctx, time.Second, func() bool {
		all, err := reader.ReadAll(ctx)
		if err != nil {
			return false
		}
		done = 0
		for _, st := range all {
			if allSucceeded(st) {
				done++
			}
		}
		logf("%d of %d plans migrated", done, n)
		return done == n
	})
	wall := time.Since(t0)
	if err != nil {
		return nil, nil, fmt.Errorf("%d of %d plans migrated: %w", done, n, err)
	}
	after := scrape()
	cpu1, execCPU1 := procs.cpu()
	bench1 := cpuSeconds(os.Getpid())
	steps := after["ferry_steps_total{outcome=Succeeded}"] - before["ferry_steps_total{outcome=Succeeded}"]
	res := &Result{
		Layout: lay.name, NATSReplicas: max(lay.natsNodes, 1), ExecutorReplicas: lay.executors,
		Plans: n, Steps: int(steps), StepsPerPlan: steps / float64(n), WallSeconds: wall.Seconds(),
		StepsPerSecond:  steps / wall.Seconds(),
		LatencyP50:      quantile(after, "ferry_step_latency_seconds", 0.50),
		LatencyP95:      quantile(after, "ferry_step_latency_seconds", 0.95),
		LatencyP99:      quantile(after, "ferry_step_latency_seconds", 0.99),
		KubePerStep:     (after["ferry_kube_requests_total"] - before["ferry_kube_requests_total"]) / steps,
		WorkloadPerStep: float64(proxy.requests.Load()-proxyBefore) / steps,
		GitFetches:      after["ferry_git_fetches_total"] - before["ferry_git_fetches_total"],
		GitPushes:       after["ferry_git_pushes_total"] - before["ferry_git_pushes_total"],
		CloudPerPlan:    float64(cloud.requests.Load()-cloudBefore) / float64(n),
		CPUSeconds:      cpu1 - cpu0,
		BenchCPUSeconds: bench1 - bench0,
	}
	if lay.executors > 0 {
		res.ExecutorCPUSeconds = execCPU1 - execCPU0
	}

	// The last progress comments and commit statuses follow the last
	// step by up to the comment interval (10s): they belong to the
	// migration, not to idleness.
	logf("all migrated in %s; waiting for the last comment edits", wall.Round(100*time.Millisecond))
	settleGitHub(ctx, gh, 12*time.Second, 2*time.Minute)
	res.GitHubPerPlan = float64(len(gh.Calls(""))-ghBefore) / float64(n)
	logf("measuring %s of idleness", idle)
	i0 := scrape()
	c0, e0 := procs.cpu()
	gh0, cl0, px0 := len(gh.Calls("")), cloud.requests.Load(), proxy.requests.Load()
	select {
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-time.After(idle):
	}
	i1 := scrape()
	c1, e1 := procs.cpu()
	per := interval.Seconds() / idle.Seconds()
	res.Idle = Idle{
		IntervalSeconds:  interval.Seconds(),
		CPUSeconds:       (c1 - c0) * per,
		CorePercent:      100 * (c1 - c0) / idle.Seconds(),
		KubeRequests:     (i1["ferry_kube_requests_total"] - i0["ferry_kube_requests_total"]) * per,
		WorkloadRequests: float64(proxy.requests.Load()-px0) * per,
		GitLsRemotes:     (i1["ferry_git_ls_remotes_total"] - i0["ferry_git_ls_remotes_total"]) * per,
		GitFetches:       (i1["ferry_git_fetches_total"] - i0["ferry_git_fetches_total"]) * per,
		GitHubCalls:      float64(len(gh.Calls(""))-gh0) * per,
		CloudCalls:       float64(cloud.requests.Load()-cl0) * per,
	}
	if lay.executors > 0 {
		res.Idle.ExecutorCPUSeconds = (e1 - e0) * per
	}
	res.PeakRSSMiB, res.MemoryLimitMiB = peakRSSMiB(pid), limitMiB
	res.ExecutorPeakRSSMiB = procs.executorPeakRSSMiB()
	if profile := os.Getenv("FERRY_BENCH_HEAP"); profile != "" {
		if resp, err := http.Get("http://" + metrics + "/debug/pprof/heap"); err == nil {
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			_ = os.WriteFile(profile, data, 0o644)
		}
	}
	if o.baselinePlans == 0 || lay != single {
		return res, nil, nil
	}
	logf("stopping the reconciler and the controller stand-ins: the kubectl baseline runs last, alone")
	if err := stopProcess(ctx, pid); err != nil {
		return nil, nil, err
	}
	standIns.Close()
	b := &baseline{kubectl: o.kubectl, plans: o.baselinePlans, parallel: o.baselineParallel,
		example: filepath.Join("bin", "bench-baseline-example.sh"),
		mgmt:    mgmt, workload: workload, proxy: proxy, cloud: cloud, ferry: f}
	return res, b, nil
}

// stopProcess ends process pid with SIGTERM, as in production, and waits
// until it is gone.
func stopProcess(ctx context.Context, pid int) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop process %d: %w", pid, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	gone := func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		return errors.Is(err, fs.ErrNotExist)
	}
	if err := waitFor(ctx, 100*time.Millisecond, gone); err != nil {
		return fmt.Errorf("stop process %d: still running after SIGTERM: %w", pid, err)
	}
	return nil
}

// settleGitHub waits until the GitHub stand-in got no call for quiet, or
// for at most limit.
func settleGitHub(ctx context.Context, gh *fakegithub.Server, quiet, limit time.Duration) {
	deadline := time.Now().Add(limit)
	last, lastChange := len(gh.Calls("")), time.Now()
	for time.Since(lastChange) < quiet && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(time.Second)
		if n := len(gh.Calls("")); n != last {
			last, lastChange = n, time.Now()
		}
	}
}

func allSucceeded(st *status.PlanStatus) bool {
	if len(st.Phases) == 0 {
		return false
	}
	for _, ph := range st.Phases {
		if ph.State != status.PhaseSucceeded {
			return false
		}
	}
	return true
}

// quiet drops the stand-ins' log lines, one per object they move.
type quiet struct{ *testenv.Program }

func (quiet) Logf(string, ...any) {}

func waitFor(ctx context.Context, every time.Duration, cond func() bool) error {
	for {
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// scrapeMetrics reads a Prometheus text exposition into "name{label=value}"
// sums: each series is added to its name and to name{l=v} for each label.
func scrapeMetrics(url string) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get(url)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		series := line[:i]
		name, labels, _ := strings.Cut(series, "{")
		out[name] += v
		for _, l := range strings.Split(strings.TrimSuffix(labels, "}"), ",") {
			if k, val, ok := strings.Cut(l, "="); ok {
				out[name+"{"+k+"="+strings.Trim(val, `"`)+"}"] += v
			}
		}
	}
	return out
}

// quantile estimates a quantile of a Prometheus histogram from its buckets
// (summed over labels), interpolating linearly inside the bucket.
func quantile(m map[string]float64, name string, q float64) float64 {
	type bucket struct{ le, count float64 }
	var bs []bucket
	for k, v := range m {
		if le, ok := strings.CutPrefix(k, name+"_bucket{le="); ok {
			bound, err := strconv.ParseFloat(strings.TrimSuffix(le, "}"), 64)
			if err == nil {
				bs = append(bs, bucket{bound, v})
			}
		}
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	if len(bs) == 0 || bs[len(bs)-1].count == 0 {
		return math.NaN()
	}
	rank := q * bs[len(bs)-1].count
	prevLE, prevCount := 0.0, 0.0
	for _, b := range bs {
		if b.count >= rank {
			if math.IsInf(b.le, 1) {
				return prevLE
			}
			return prevLE + (b.le-prevLE)*(rank-prevCount)/math.Max(b.count-prevCount, 1)
		}
		prevLE, prevCount = b.le, b.count
	}
	return prevLE
}

// cpuSeconds is the user and system CPU time of process pid.
func cpuSeconds(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return math.NaN()
	}
	// Fields after the command name (which may hold spaces), from field 3.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

// peakRSSMiB is process pid's peak resident set (VmHWM).
func peakRSSMiB(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return math.NaN()
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return math.NaN()
}
