package reconciler

// One plan's memory between cycles: what is in flight, what failed or
// succeeded, the record fed back to the planner.

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/step"
)

// planState is the loop's memory of one plan. Its methods are named for
// what happens to the plan, and each holds mu, so that the worker
// reconciling the plan, results, informer events and commands may call
// them at once.
type planState struct {
	mu sync.Mutex
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

// begin starts a reconcile of p, from file at cycle's revision: it takes
// the plan's file and the namespaces it reads, forgets successes older
// than JetStream's duplicate window and steps published more than
// staleAfter ago, and returns the record to observe with and whether steps
// are still in flight.
func (st *planState) begin(ctx context.Context, cycle Cycle, file string, p *v1alpha1.MigrationPlan, staleAfter time.Duration) (observed.Record, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.present, st.file = true, file
	st.dirty, st.settled, st.rev, st.observedAt = false, false, cycle.Revision, cycle.At
	st.namespaces, st.cluster = planNamespaces(p), p.Spec.Cluster.Name
	for id, at := range st.succeeded {
		if cycle.At.Sub(at) > events.DuplicateWindow {
			delete(st.succeeded, id)
		}
	}
	for id, at := range st.inFlight {
		if cycle.At.Sub(at) > staleAfter {
			logging.From(ctx).Warn("no result for a published step; planning again from the observed state", "step_id", id, "published", at)
			delete(st.inFlight, id)
		}
	}
	return st.recordCopy(), len(st.inFlight) > 0
}

// verdict returns the verdict on the approval key, if one was verified.
func (st *planState) verdict(key string) (Verdict, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	v, ok := st.verdicts[key]
	return v, ok
}

// verified remembers the verdict on the approval key at revision rev,
// forgetting those of other revisions.
func (st *planState) verified(rev, key string, v Verdict) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.verdictsAt != rev {
		st.verdicts, st.verdictsAt = map[string]Verdict{}, rev
	}
	st.verdicts[key] = v
}

// cacheLag is how long after a step's success the loop trusts the result
// over an observation that does not show its effect yet (informers lag
// behind the executor's write by milliseconds; a slow watch, by seconds).
const cacheLag = 30 * time.Second

// publishing decides whether ev is published: not when its step failed
// for good at ev's revision (a person must act; a new commit retries it),
// nor when it succeeded less than cacheLag ago (the observation lags
// behind). It gives ev the ID of the plan's current retry, and puts it in
// flight from now, before it is published: an executor may run it and its
// result reach OnResult before PublishStep returns. done reports that the
// step succeeded before.
func (st *planState) publishing(ev *events.StepEvent, now time.Time) (done, publish bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.failedAt == ev.Revision && st.failed[ev.Step.Key] {
		return false, false
	}
	if st.retries > 0 {
		ev.ID = events.RetryID(ev.ID, st.retries)
	}
	doneAt, done := st.succeeded[ev.ID]
	if done && now.Sub(doneAt) < cacheLag {
		return done, false // its effect is not observed yet; an informer event will wake the loop
	}
	st.inFlight[ev.ID] = now
	return done, true
}

// unpublished takes back a step put in flight that no result will come
// for: its publication failed, or JetStream dropped it as a duplicate.
func (st *planState) unpublished(id string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.inFlight, id)
}

// published records that a step of phase was published: unless p rolls
// back, phase is acted on.
func (st *planState) published(p *v1alpha1.MigrationPlan, phase string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if p.Spec.Rollback == nil && p.PhaseIndex(phase) > p.PhaseIndex(st.record.Approved) {
		st.record.Approved = phase
	}
}

// planned records how a reconcile of p left the plan: at rest or not,
// and, when res finds its rollback done, that nothing after the phase the
// rollback kept is acted on any more: approving it again migrates forward
// (status.FromResult says the same in the status).
func (st *planState) planned(p *v1alpha1.MigrationPlan, res *planner.Result, settled bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.settled = settled
	if res.RolledBack {
		st.record.Approved = ""
		if p.Spec.Rollback.To != v1alpha1.RollbackNone {
			st.record.Approved = p.Spec.Rollback.To
		}
	}
}

// onResult takes a step's result at now: the plan may have changed; a
// final result takes the step out of flight; a success is remembered, and
// a passed probe and the keypairs it created go to the record; a final
// failure stops the step at its revision. It returns when the step was
// published, if it was in flight.
func (st *planState) onResult(ev *events.ResultEvent, now time.Time) (time.Time, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.dirty = true
	published, inFlight := st.inFlight[ev.StepID]
	switch ev.Outcome {
	case events.Succeeded:
		delete(st.inFlight, ev.StepID)
		st.succeeded[ev.StepID] = now
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
	return published, inFlight
}

// retry forgets the failures of the steps of phases, has the next
// publication of each step use a new ID, and returns how many failures
// there were.
func (st *planState) retry(phases []string) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	n := 0
	for key := range st.failed {
		if phase, _, _, err := step.ParseKey(key); err == nil && slices.Contains(phases, phase) {
			delete(st.failed, key)
			n++
		}
	}
	if n > 0 {
		st.retries++
		st.dirty, st.settled = true, false
	}
	return n
}

// restore seeds the record from the plan's recorded status.
func (st *planState) restore(record observed.Record) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.record = record
}

// changed marks the plan for observation if it is of cluster (any, when
// cluster is "") and reads namespace, and reports whether it did.
func (st *planState) changed(namespace, cluster string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if (cluster == "" || cluster == st.cluster) && slices.Contains(st.namespaces, namespace) {
		st.dirty = true
		return true
	}
	return false
}

// removed records that the plan's file left the branch, and reports
// whether it was there until now.
func (st *planState) removed() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	was := st.present
	st.present = false
	return was
}

// holds reports whether file was the plan's when last valid, and is on
// the branch.
func (st *planState) holds(file string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.present && st.file == file
}

// atRest reports whether the plan may be skipped this cycle: at its last
// observation it had nothing to run, nothing in flight and nothing
// blocked, and since then the revision did not change, no result came, no
// informer saw a change in its namespaces, and resync did not pass. The
// workload clusters and the cloud have no informers: resync bounds how
// late a change there is seen for a plan at rest.
func (st *planState) atRest(cycle Cycle, resync time.Duration) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.settled && !st.dirty && st.rev == cycle.Revision && cycle.At.Sub(st.observedAt) < resync
}

// recorded returns a copy of the record that the planner may keep.
func (st *planState) recorded() observed.Record {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.recordCopy()
}

// recordCopy is a copy of the record that the planner may keep. Callers
// hold st.mu.
func (st *planState) recordCopy() observed.Record {
	r := st.record
	r.Checks = slices.Clone(st.record.Checks)
	r.Keypairs = slices.Clone(st.record.Keypairs)
	return r
}

// isCheck reports whether a step key is a one-shot check whose passing
// leaves nothing to observe (the planner asks the record for it): a probe.
// A key that does not parse is no check.
func isCheck(key string) bool {
	_, action, _, err := step.ParseKey(key)
	return err == nil && action == step.Probe
}
