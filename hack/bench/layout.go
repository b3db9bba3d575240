package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ferry-dev/ferry/internal/app"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// layout is how ferry's processes run in one run of the benchmark.
type layout struct {
	name string
	// natsNodes, when above zero, is the size of a NATS JetStream cluster
	// that the benchmark starts in its own process, and the replicas of
	// the streams on it (--nats-replicas). At zero the reconciler embeds
	// its NATS server, with one copy of each stream.
	natsNodes int
	// executors is how many `reconciler executor` processes take the
	// steps; at zero the executors run in the reconciler's process.
	executors int
}

var (
	// single is `reconciler run` as a newcomer runs it: executors in
	// process, the embedded NATS server.
	single = layout{name: "single"}
	// cluster is ferry as a production install runs it: a three-node
	// NATS cluster with R3 streams, `reconciler run --executors=false`
	// and three executor replicas sharing the steps.
	cluster = layout{name: "cluster", natsNodes: 3, executors: 3}
)

// layouts are the values of --layout, each with the runs it makes in
// order: cluster runs the single layout first, so that one invocation
// compares the two on the same machine, with the same load beside them.
var layouts = []struct {
	name string
	runs []layout
}{
	{"single", []layout{single}},
	{"cluster", []layout{single, cluster}},
}

// runsOf returns the runs of --layout name, or a usage error naming the
// layouts.
func runsOf(name string) ([]layout, error) {
	var names []string
	for _, l := range layouts {
		if l.name == name {
			return l.runs, nil
		}
		names = append(names, l.name)
	}
	return nil, fmt.Errorf("--layout %q: unknown layout; layouts are %s", name, strings.Join(names, ", "))
}

// launch is what ferry's processes of one run are started with.
type launch struct {
	bin string // the reconciler binary
	// run is `reconciler run`'s arguments but for the event bus and the
	// executors, which the layout adds.
	run []string
	// kubeconfig is the management cluster's and repo the plans
	// repository: the executor replicas read the cluster, the OpenStack
	// credentials and the workload clusters' kubeconfigs through the
	// first, and manifests from the second, as the reconciler does.
	kubeconfig, repo string
	dir              string   // where the executors keep their Git caches
	logPrefix        string   // logs are <logPrefix>-reconciler.log, <logPrefix>-executor-<i>.log
	env              []string // added to every process's environment
}

// processes are ferry's processes in one run, by process ID.
type processes struct {
	reconciler int   // whose metrics are the run's
	executors  []int // none in the single layout
}

// start starts ferry in layout lay: in the cluster layout the NATS
// cluster, the executor replicas, once they pull from every kind's
// consumer, and then the reconciler.
func (l launch) start(ctx context.Context, p *testenv.Program, logf func(string, ...any), lay layout) (*processes, error) {
	ps := &processes{}
	args := l.run
	if lay.natsNodes > 0 {
		logf("starting a NATS JetStream cluster of %d nodes", lay.natsNodes)
		nc := testenv.StartNATSCluster(p, lay.natsNodes)
		bus := []string{"--nats-url", nc.URL, "--nats-ca", nc.CA, "--nats-replicas", strconv.Itoa(lay.natsNodes)}
		args = slices.Concat(args, []string{"--executors=false"}, bus)
		for i := 1; i <= lay.executors; i++ {
			name := fmt.Sprintf("executor-%d", i)
			exec := slices.Concat([]string{"executor", "--kubeconfig", l.kubeconfig, "--repo", l.repo,
				"--data-dir", filepath.Join(l.dir, name)}, bus)
			logFile := l.logPrefix + "-" + name + ".log"
			logf("starting %s %s (log: %s)", l.bin, strings.Join(exec, " "), logFile)
			pid, err := p.StartProcess(l.bin, exec, logFile, l.env...)
			if err != nil {
				return nil, err
			}
			ps.executors = append(ps.executors, pid)
		}
		if err := waitExecutors(ctx, nc.JetStream, lay); err != nil {
			return nil, err
		}
	}
	logFile := l.logPrefix + "-reconciler.log"
	logf("starting %s run (log: %s)", l.bin, logFile)
	pid, err := p.StartProcess(l.bin, args, logFile, l.env...)
	if err != nil {
		return nil, err
	}
	ps.reconciler = pid
	return ps, nil
}

// waitExecutors waits until the streams have lay.natsNodes replicas and
// every executor replica pulls from every kind's consumer, so that no
// step of the fleet waits for a replica still connecting.
func waitExecutors(ctx context.Context, js jetstream.JetStream, lay layout) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last string
	ready := func() bool {
		// A JetStream API request whose answer is lost (the cluster is
		// busy placing the streams) would wait as long as its context.
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		for _, name := range []string{events.StreamSteps, events.StreamResults} {
			s, err := js.Stream(ctx, name)
			if err != nil {
				last = fmt.Sprintf("stream %s: %v", name, err)
				return false
			}
			info, err := s.Info(ctx)
			if err != nil || info.Config.Replicas != lay.natsNodes {
				last = fmt.Sprintf("stream %s: not %d replicas yet (%v)", name, lay.natsNodes, err)
				return false
			}
		}
		for _, kind := range app.Kinds {
			c, err := js.Consumer(ctx, events.StreamSteps, events.ConsumerName(step.Kind(kind)))
			if err != nil {
				last = fmt.Sprintf("consumer of %s: %v", kind, err)
				return false
			}
			info, err := c.Info(ctx)
			if err != nil || info.NumWaiting < lay.executors {
				last = fmt.Sprintf("consumer of %s: fewer than %d replicas pulling (%v)", kind, lay.executors, err)
				return false
			}
		}
		return true
	}
	if err := waitFor(ctx, 200*time.Millisecond, ready); err != nil {
		return fmt.Errorf("executor replicas not ready: %s: %w", last, err)
	}
	return nil
}

// cpu is the CPU time of the reconciler and of the executors together.
func (ps *processes) cpu() (reconciler, executors float64) {
	for _, pid := range ps.executors {
		executors += cpuSeconds(pid)
	}
	return cpuSeconds(ps.reconciler), executors
}

// executorPeakRSSMiB is each executor replica's peak RSS.
func (ps *processes) executorPeakRSSMiB() []float64 {
	var out []float64
	for _, pid := range ps.executors {
		out = append(out, peakRSSMiB(pid))
	}
	return out
}
