package reconciler

// Reconciling one plan: observe, plan, publish the next group.

import (
	"context"
	"time"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/step"
)

// reconcileQueued reconciles a plan at the revision last loaded, unless
// it is at rest, or has no valid file there (the cycles record that). It
// reports whether it reconciled, and how that failed.
func (l *Loop) reconcileQueued(ctx context.Context, name string) (Cycle, bool, error) {
	l.mu.Lock()
	loaded := l.loaded
	l.mu.Unlock()
	if loaded == nil {
		return Cycle{}, false, nil
	}
	f := loaded.byName[name]
	if f == nil {
		return Cycle{}, false, nil
	}
	cycle := Cycle{Revision: loaded.rev, At: l.Now().UTC()}
	if l.settled(name, cycle) {
		return Cycle{}, false, nil
	}
	ctx = logging.Attach(observed.WithRepo(ctx, loaded.fsys), "revision", short(cycle.Revision), "plan", name)
	l.mu.Lock()
	l.progress.plans[name] = time.Now()
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.progress.plans, name)
		l.mu.Unlock()
	}()
	return cycle, true, l.reconcile(ctx, cycle, f.Path, f.Plan)
}

// reconcile observes, plans and publishes one plan.
func (l *Loop) reconcile(ctx context.Context, cycle Cycle, file string, p *v1alpha1.MigrationPlan) error {
	log := logging.From(ctx)
	st := l.state(p.Metadata.Name)
	l.mu.Lock()
	st.present, st.file = true, file
	st.dirty, st.settled, st.rev, st.observedAt = false, false, cycle.Revision, cycle.At
	st.namespaces, st.cluster = planNamespaces(p), p.Spec.Cluster.Name
	record := st.recordCopy()
	for id, at := range st.succeeded {
		if cycle.At.Sub(at) > events.DuplicateWindow {
			delete(st.succeeded, id)
		}
	}
	for id, at := range st.inFlight {
		if cycle.At.Sub(at) > l.StaleAfter {
			log.Warn("no result for a published step; planning again from the observed state", "step_id", id, "published", at)
			delete(st.inFlight, id)
		}
	}
	busy := len(st.inFlight) > 0
	l.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, l.Timeout)
	defer cancel()
	snap, err := l.Observer.Observe(ctx, p, record)
	if err != nil {
		if l.Recorder != nil {
			l.Recorder.Unobserved(ctx, cycle, file, p.Metadata.Name, err)
		}
		return err
	}
	planned := p
	refused := l.verify(ctx, cycle, file, p, st, record)
	if refused != nil {
		planned = refused.plan
	}
	res, err := planner.Plan(planned, snap)
	if err != nil {
		return err
	}
	if refused != nil {
		refused.explain(p, res)
	}
	var published []step.Step
	next := res.Next()
	if next != nil && !busy {
		published, err = l.publish(ctx, cycle, planned, res.Runnable, next, st)
	}
	l.mu.Lock()
	st.settled = next == nil && !busy && res.Stopped == "" && !blocked(res) && (refused == nil || !refused.again)
	if res.RolledBack {
		// Nothing after the phase the rollback kept is acted on any
		// more: approving it again migrates forward (status.FromResult
		// says the same in the status).
		st.record.Approved = ""
		if p.Spec.Rollback.To != v1alpha1.RollbackNone {
			st.record.Approved = p.Spec.Rollback.To
		}
	}
	l.mu.Unlock()
	if l.Recorder != nil {
		l.Recorder.Planned(ctx, cycle, file, p.Metadata.Name, res, published)
	}
	return err
}

// cacheLag is how long after a step's success the loop trusts the result
// over an observation that does not show its effect yet (informers lag
// behind the executor's write by milliseconds; a slow watch, by seconds).
const cacheLag = 30 * time.Second

// publish sends a group's steps, except those that failed for good at this
// revision (a person must act; a new commit retries them) and those that
// just succeeded (the observation lags behind).
func (l *Loop) publish(ctx context.Context, cycle Cycle, p *v1alpha1.MigrationPlan, phase string, g *step.Group, st *planState) ([]step.Step, error) {
	log := logging.From(ctx)
	var published []step.Step
	for _, s := range g.Steps {
		l.mu.Lock()
		failed := st.failedAt == cycle.Revision && st.failed[s.Key]
		l.mu.Unlock()
		if failed {
			continue
		}
		ev := events.NewStepEvent(p, cycle.Revision, s, cycle.At)
		l.mu.Lock()
		if st.retries > 0 {
			ev.ID = events.RetryID(ev.ID, st.retries)
		}
		doneAt, done := st.succeeded[ev.ID]
		l.mu.Unlock()
		if done && l.Now().Sub(doneAt) < cacheLag {
			continue // its effect is not observed yet; an informer event will wake the loop
		}
		log.Info("publishing step", "phase", s.Phase, "step", s.Key, "executor", s.Executor)
		// In flight before it is published: an executor may run it and
		// its result reach OnResult before PublishStep returns.
		l.mu.Lock()
		st.inFlight[ev.ID] = l.Now()
		l.mu.Unlock()
		duplicate, err := l.Publisher.PublishStep(ctx, ev)
		if err != nil {
			l.mu.Lock()
			delete(st.inFlight, ev.ID)
			l.mu.Unlock()
			return published, err
		}
		l.mu.Lock()
		if duplicate && done {
			// JetStream dropped it: no result will come.
			delete(st.inFlight, ev.ID)
			log.Warn("a step that succeeded is not observed done, and JetStream drops it as a duplicate until its window ends", "step", s.Key)
			l.mu.Unlock()
			continue
		}
		if p.Spec.Rollback == nil && p.PhaseIndex(phase) > p.PhaseIndex(st.record.Approved) {
			st.record.Approved = phase
		}
		l.mu.Unlock()
		published = append(published, s)
	}
	return published, nil
}

// blocked reports whether a phase of res waits on a health check or input.
func blocked(res *planner.Result) bool {
	for _, ph := range res.Phases {
		if ph.State == planner.Blocked {
			return true
		}
	}
	return false
}

// planNamespaces are the namespaces whose objects a plan's observation
// reads: its cluster's, and those its Secrets are copied from.
func planNamespaces(p *v1alpha1.MigrationPlan) []string {
	ns := []string{p.Spec.Cluster.Namespace}
	if a := p.Spec.Adopt; a != nil && a.SecretsFrom != "" {
		ns = append(ns, a.SecretsFrom)
	}
	if f := p.Spec.Target.Identity.From; f != nil {
		ns = append(ns, f.Namespace)
	}
	return ns
}
