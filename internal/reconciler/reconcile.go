package reconciler

// Reconciling one plan: observe, plan, publish the next group.

import (
	"context"

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
	loaded := l.loaded.Load()
	if loaded == nil || loaded.byName[name] == nil {
		return Cycle{}, false, nil
	}
	f := loaded.byName[name]
	cycle := Cycle{Revision: loaded.rev, At: l.Now().UTC()}
	if l.state(name).atRest(cycle, l.Resync) {
		return Cycle{}, false, nil
	}
	ctx = logging.Attach(observed.WithRepo(ctx, loaded.fsys), "revision", short(cycle.Revision), "plan", name)
	l.progress.reconciling(name)
	defer l.progress.reconciled(name)
	return cycle, true, l.reconcile(ctx, cycle, f.Path, f.Plan)
}

// reconcile observes, plans and publishes one plan.
func (l *Loop) reconcile(ctx context.Context, cycle Cycle, file string, p *v1alpha1.MigrationPlan) error {
	st := l.state(p.Metadata.Name)
	record, busy := st.begin(ctx, cycle, file, p, l.StaleAfter)
	// What a rollback may delete is what the management cluster says ferry
	// created, not what the status branch lists.
	record.Keypairs = l.trustedKeypairs(p.Metadata.Name, record.Keypairs)

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
	if why := l.rewritten(); why != "" {
		refused = &refusal{plan: p, content: true, reason: why}
	}
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
	st.planned(p, res, next == nil && !busy && res.Stopped == "" && !blocked(res) && (refused == nil || !refused.again))
	if l.Recorder != nil {
		l.Recorder.Planned(ctx, cycle, file, p.Metadata.Name, res, published)
	}
	return err
}

// publish sends a group's steps, except those the plan's state holds back
// (planState.publishing).
func (l *Loop) publish(ctx context.Context, cycle Cycle, p *v1alpha1.MigrationPlan, phase string, g *step.Group, st *planState) ([]step.Step, error) {
	log := logging.From(ctx)
	var published []step.Step
	for _, s := range g.Steps {
		if err := l.actingOn(ctx, cycle.Revision); err != nil {
			return published, err
		}
		ev := events.NewStepEvent(p.Metadata.Name, cycle.Revision, s, cycle.At)
		done, ok := st.publishing(ev, l.Now())
		if !ok {
			continue
		}
		log.Info("publishing step", "phase", s.Phase, "step", s.Key, "executor", s.Executor)
		duplicate, err := l.Publisher.PublishStep(ctx, ev)
		if err != nil {
			st.unpublished(ev.ID)
			return published, err
		}
		if duplicate && done {
			// JetStream dropped it: no result will come.
			st.unpublished(ev.ID)
			log.Warn("a step that succeeded is not observed done, and JetStream drops it as a duplicate until its window ends", "step", s.Key)
			continue
		}
		st.published(p, phase)
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
