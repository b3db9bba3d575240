package main

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// replaceEvery is how often a chaos run migrates the replace scenario
// instead of adopt: runs 3, 6, 9, … do.
const replaceEvery = 3

// drainFaults are the replace runs' faults, in the order those runs take
// them: each strikes while a cutover drain runs, when an old node is
// cordoned, still runs web pods, and an executor replica is running its
// drain step. The workload API server's restart cuts the drain's
// evictions and watches, and the observer's reads of the Nodes, off at
// once: the drain step fails and runs again.
var drainFaults = []fault{
	{name: "kill -9 the executor replica draining an old node", drain: true, inject: func(_ context.Context, w *world, _ int) error {
		name := w.drainingExecutor(w.fx.drain.node)
		if name == "" {
			name = "executor-1"
		}
		w.out.say("==> %s runs the drain of %s", name, w.fx.drain.node)
		return w.kill9(time.Second, name)
	}},
	{name: "kill -9 the reconciler during a cutover drain", drain: true, inject: killReconciler},
	{name: "restart the workload cluster's API server during a cutover drain", drain: true, inject: func(_ context.Context, w *world, _ int) error {
		w.out.say("==> the workload cluster's API server stops while Node %s drains; etcd keeps running", w.fx.drain.node)
		w.fx.cloud.Workload.RestartAPIServer(w.r)
		return nil
	}},
}

// waitDrainStep waits until an old node is being drained: cordoned, not
// empty, and an executor replica runs its drain step (the step after
// the cordon). It records the node in the drain watch.
func (w *world) waitDrainStep(ctx context.Context) error {
	for {
		node, err := w.fx.drain.waitDraining(ctx)
		if err != nil {
			return err
		}
		if w.drainingExecutor(node) != "" && w.fx.drain.draining(ctx) == node {
			w.fx.drain.node = node
			w.out.say("==> a cutover drain runs: Node %s is cordoned and still runs pods", node)
			return nil
		}
		sleep(ctx, 20*time.Millisecond)
	}
}

// drainingExecutor is the executor replica whose log says it is running
// the drain step of node, or "" when none is.
func (w *world) drainingExecutor(node string) string {
	target := `action=drain target="Node ` + node + `"`
	name, _ := w.executorRunning(func(line string) bool { return strings.Contains(line, target) })
	return name
}

// logField is the value of key in a log line in slog's text format,
// unquoted when slog quoted it.
func logField(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+2:]
	if q, err := strconv.QuotedPrefix(v); err == nil {
		if u, err := strconv.Unquote(q); err == nil {
			return u
		}
	}
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v
}
