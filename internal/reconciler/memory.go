package reconciler

// The loop's memory of each plan between cycles, and what changes it from
// outside a reconcile: results, informer events, `/ferry retry`, a restart.

import (
	"context"
	"maps"
	"time"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/status"
)

// state returns the loop's memory of plan, new if the loop has none.
func (l *Loop) state(plan string) *planState {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.plans == nil {
		l.plans = map[string]*planState{}
	}
	st, ok := l.plans[plan]
	if !ok {
		st = &planState{inFlight: map[string]time.Time{}, failed: map[string]bool{}, succeeded: map[string]time.Time{}}
		l.plans[plan] = st
	}
	return st
}

// states returns the loop's memory of every plan it knows, by name.
func (l *Loop) states() map[string]*planState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.plans)
}

// Retry forgets the failures of plan's steps in phases, so that the next
// cycle publishes them again, under new IDs (JetStream would drop the old
// ones as duplicates), and returns how many there were.
func (l *Loop) Retry(plan string, phases []string) int {
	l.init()
	n := l.state(plan).retry(phases)
	if n > 0 {
		l.queue.Add(plan)
	}
	return n
}

// Restore seeds the loop's memory from recorded statuses (after a restart),
// before Run.
func (l *Loop) Restore(plan string, record observed.Record) {
	l.state(plan).restore(record)
}

// OnResult takes a step result: the step is no longer in flight, a passed
// probe is remembered, a final failure stops the step at its revision. It
// wakes the loop.
func (l *Loop) OnResult(ctx context.Context, ev *events.ResultEvent) error {
	l.init()
	now := l.Now()
	if ev.Outcome == events.Succeeded {
		l.createdKeypairs(ctx, ev.Plan, status.Keypairs(ev.Created))
	}
	if published, ok := l.state(ev.Plan).onResult(ev, now); ok && ev.Outcome != events.Retrying && l.Latency != nil {
		defer l.Latency(ev, now.Sub(published))
	}
	if ev.Outcome != events.Retrying {
		// The step may have changed what the observer caches (the cloud,
		// the workload cluster): the next cycle must see its effect.
		l.Observer.Forget(ev.Plan, ev.Executor)
	}
	if l.Recorder != nil {
		l.Recorder.Result(ctx, ev)
	}
	l.queue.Add(ev.Plan)
	return nil
}

// Changed marks for observation the plans of cluster that read namespace
// (their cluster's, or one they copy Secrets from), or all plans that read
// namespace when cluster is "" (unknown), and queues them for Run's
// workers. The management cluster's informers call it.
func (l *Loop) Changed(namespace, cluster string) {
	l.init()
	for name, st := range l.states() {
		if st.changed(namespace, cluster) {
			l.queue.Add(name)
		}
	}
}

// planOf returns the plan whose file was file when last valid, or "".
func (l *Loop) planOf(file string) string {
	for name, st := range l.states() {
		if st.holds(file) {
			return name
		}
	}
	return ""
}

// record returns a copy of what the loop remembers of a plan for the
// planner.
func (l *Loop) record(plan string) observed.Record {
	return l.state(plan).recorded()
}
