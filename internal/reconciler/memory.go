package reconciler

// The loop's memory of each plan between cycles: what is in flight, what
// failed or succeeded, the record fed back to the planner.

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/step"
)

// planState is the loop's memory of one plan.
type planState struct {
	// inFlight are the IDs of published steps without a final result, and
	// when they were published; no new group is published while any is
	// left, unless it is older than StaleAfter (its result was lost).
	inFlight map[string]time.Time
	// failed are the keys of steps that failed for good at revision
	// failedAt; they are not published again until the revision changes.
	failed   map[string]bool
	failedAt string
	// retries counts `/ferry retry` commands carried out: the steps of a
	// retry are published under IDs of their own.
	retries int
	// succeeded are the IDs of steps whose success was reported, and
	// when: the informers the observer reads may not show a step's effect
	// yet, and such a step is not published again (see cacheLag).
	succeeded map[string]time.Time
	// record is fed back to the planner: the furthest phase acted on and
	// the one-shot checks that passed.
	record observed.Record
	// present is false once the plan's file left the branch.
	present bool
	// file is the plan's path in the repository when last valid.
	file string
	// settled is true when the last observation (at observedAt, of
	// revision rev) left nothing to run, in flight or blocked; dirty when
	// something may have changed since (a result, an informer event about
	// cluster in one of namespaces, the namespaces the plan reads).
	settled    bool
	dirty      bool
	rev        string
	observedAt time.Time
	namespaces []string
	cluster    string
	// verdicts are the approvals verified at revision verdictsAt, by
	// revision, file and approval.
	verdicts   map[string]Verdict
	verdictsAt string
}

// Retry forgets the failures of plan's steps in phases, so that the next
// cycle publishes them again, under new IDs (JetStream would drop the old
// ones as duplicates), and returns how many there were.
func (l *Loop) Retry(plan string, phases []string) int {
	l.init()
	st := l.state(plan)
	l.mu.Lock()
	n := 0
	for key := range st.failed {
		if slices.ContainsFunc(phases, func(ph string) bool { return strings.HasPrefix(key, ph+"/") }) {
			delete(st.failed, key)
			n++
		}
	}
	if n > 0 {
		st.retries++
		st.dirty, st.settled = true, false
	}
	l.mu.Unlock()
	if n > 0 {
		l.queue.Add(plan)
	}
	return n
}

// Restore seeds the loop's memory from recorded statuses (after a restart),
// before Run.
func (l *Loop) Restore(plan string, record observed.Record) {
	l.state(plan).record = record
}

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

// OnResult takes a step result: the step is no longer in flight, a passed
// probe is remembered, a final failure stops the step at its revision. It
// wakes the loop.
func (l *Loop) OnResult(ctx context.Context, ev *events.ResultEvent) error {
	l.init()
	st := l.state(ev.Plan)
	l.mu.Lock()
	st.dirty = true
	if published, ok := st.inFlight[ev.StepID]; ok && ev.Outcome != events.Retrying && l.Latency != nil {
		defer l.Latency(ev, l.Now().Sub(published))
	}
	switch ev.Outcome {
	case events.Succeeded:
		delete(st.inFlight, ev.StepID)
		st.succeeded[ev.StepID] = l.Now()
		if st.failedAt == ev.Revision {
			delete(st.failed, ev.StepKey) // a retry succeeded
		}
		if isCheck(ev.StepKey) && !slices.Contains(st.record.Checks, ev.StepKey) {
			st.record.Checks = append(st.record.Checks, ev.StepKey)
			sort.Strings(st.record.Checks)
		}
		for _, k := range status.Keypairs(ev.Created) {
			if !slices.Contains(st.record.Keypairs, k) {
				st.record.Keypairs = append(st.record.Keypairs, k)
				sort.Strings(st.record.Keypairs)
			}
		}
	case events.Failed:
		delete(st.inFlight, ev.StepID)
		if st.failedAt != ev.Revision {
			st.failed, st.failedAt = map[string]bool{}, ev.Revision
		}
		st.failed[ev.StepKey] = true
	}
	l.mu.Unlock()
	if f, ok := l.Observer.(interface {
		Forget(plan string, executor step.Kind)
	}); ok && ev.Outcome != events.Retrying {
		// The step may have changed what the observer caches (the cloud,
		// the workload cluster): the next cycle must see its effect.
		f.Forget(ev.Plan, ev.Executor)
	}
	if l.Recorder != nil {
		l.Recorder.Result(ctx, ev)
	}
	l.queue.Add(ev.Plan)
	return nil
}

// isCheck reports whether a step key is a one-shot check whose passing
// leaves nothing to observe (the planner asks the record for it): a probe.
// A key that does not parse is no check.
func isCheck(key string) bool {
	_, action, _, err := step.ParseKey(key)
	return err == nil && action == step.Probe
}

// settled reports whether a plan may be skipped this cycle: at its last
// observation it had nothing to run, nothing in flight and nothing
// blocked, and since then the revision did not change, no result came, no
// informer saw a change in its namespaces, and Resync did not pass. The
// workload clusters and the cloud have no informers: Resync bounds how
// late a change there is seen for a plan at rest.
func (l *Loop) settled(plan string, cycle Cycle) bool {
	st := l.state(plan)
	l.mu.Lock()
	defer l.mu.Unlock()
	return st.settled && !st.dirty && st.rev == cycle.Revision && cycle.At.Sub(st.observedAt) < l.Resync
}

// Changed marks for observation the plans of cluster that read namespace
// (their cluster's, or one they copy Secrets from), or all plans that read
// namespace when cluster is "" (unknown), and queues them for Run's
// workers. The management cluster's informers call it.
func (l *Loop) Changed(namespace, cluster string) {
	l.init()
	l.mu.Lock()
	var changed []string
	for name, st := range l.plans {
		if (cluster == "" || cluster == st.cluster) && slices.Contains(st.namespaces, namespace) {
			st.dirty = true
			changed = append(changed, name)
		}
	}
	l.mu.Unlock()
	for _, name := range changed {
		l.queue.Add(name)
	}
}

// planOf returns the plan whose file was file when last valid, or "".
func (l *Loop) planOf(file string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, st := range l.plans {
		if st.present && st.file == file {
			return name
		}
	}
	return ""
}

// record returns a copy of what the loop remembers of a plan for the
// planner.
func (l *Loop) record(plan string) observed.Record {
	st := l.state(plan)
	l.mu.Lock()
	defer l.mu.Unlock()
	return st.recordCopy()
}

// recordCopy is a copy of the record that the planner may keep. Callers
// hold l.mu.
func (st *planState) recordCopy() observed.Record {
	r := st.record
	r.Checks = slices.Clone(st.record.Checks)
	r.Keypairs = slices.Clone(st.record.Keypairs)
	return r
}
