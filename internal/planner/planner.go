package planner

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
)

// ErrNoStrategy is returned for a plan whose strategy the planner does not
// know; a plan that passed validation never has one.
var ErrNoStrategy = errors.New("planner: unknown strategy")

// Plan diffs a validated, defaulted plan against an observed snapshot and
// returns every phase with the steps it has left, in order. Only the first
// group of one phase is runnable (Result.Next): the first phase that is
// approved and not yet done, when no health check blocks it and approval
// did not move backwards. Plan does no I/O and reads no clock: the same
// input gives the same output.
func Plan(p *v1alpha1.MigrationPlan, s *observed.Snapshot) (*Result, error) {
	if p == nil || s == nil {
		return nil, errors.New("planner: nil plan or snapshot")
	}
	build := phaseBuilders(p)
	if build == nil {
		return nil, fmt.Errorf("%w %q", ErrNoStrategy, p.Spec.Strategy)
	}
	c := &planCtx{plan: p, snap: s, ns: p.Spec.Cluster.Namespace, name: p.Spec.Cluster.Name}
	res := &Result{
		Plan:     p.Metadata.Name,
		Cluster:  c.ns + "/" + c.name,
		Strategy: string(p.Spec.Strategy),
		Provider: p.Spec.Target.ControlPlane.Provider,
		Approve:  p.Spec.Approve,
	}
	if p.Spec.Rollback != nil {
		rollback(c, res, build)
		return res, nil
	}
	approved := p.PhaseIndex(p.Spec.Approve)
	if rec := s.Record.Approved; rec != "" && p.PhaseIndex(rec) > approved {
		now := p.Spec.Approve
		if now == "" {
			now = "nothing"
		}
		res.Stopped = fmt.Sprintf("spec.approve moved back from %s to %s: ferry stops before its next step and rolls nothing back; approve %s again to go on",
			rec, now, rec)
	}

	var firstOpen string // the first phase that is not done
	for i, name := range p.Phases() {
		b := &phaseBuilder{ctx: c, phase: Phase{Name: name}}
		next := firstOpen == ""
		if next && i <= approved {
			// Health checks guard the phase about to run; phases after it
			// would be judged against state that earlier phases still change.
			healthChecks(c, b, name)
		}
		build[name](c, b)
		ph := b.finish()
		ph.State, ph.Reason = phaseState(ph, b.blocked, i > approved, next, p.Spec.Approve)
		ph.Incomplete = len(b.blocked) > 0
		if ph.State != Succeeded && firstOpen == "" {
			firstOpen = name
			if ph.State == Approved && res.Stopped == "" {
				if gate := approvalGate(ph); gate != "" {
					ph.Reason = gate
				} else {
					res.Runnable = name
				}
			}
		} else if ph.State == Approved {
			ph.Reason = "runs after phase " + firstOpen
		}
		if res.Stopped != "" && ph.State == Approved && ph.Reason == "" {
			ph.Reason = "stopped: approval moved backwards"
		}
		res.Phases = append(res.Phases, ph)
	}
	if p.Spec.Strategy == v1alpha1.StrategyReplace {
		cleanupInventory(c)
		slices.SortStableFunc(c.inventory, func(a, b InventoryItem) int { return strings.Compare(a.Resource, b.Resource) })
		res.Inventory = c.inventory
	}
	return res, nil
}

// phaseState is a phase's state from its steps left and what blocks it:
// one past the approved phases is Pending, the next to run with a reason
// to wait Blocked, one with nothing left Succeeded.
func phaseState(ph Phase, blocked []string, pending, next bool, approve string) (PhaseState, string) {
	switch {
	case len(ph.Groups) == 0 && len(blocked) == 0:
		return Succeeded, ""
	case pending:
		reason := notApproved(approve)
		if len(blocked) > 0 {
			reason += "; " + strings.Join(blocked, "; ")
		}
		return Pending, reason
	case len(blocked) > 0 && next:
		return Blocked, strings.Join(blocked, "; ")
	}
	return Approved, ""
}

func notApproved(approve string) string {
	if approve == "" {
		return "not approved: spec.approve is empty"
	}
	return "not approved: spec.approve is " + approve
}

// approvalGate returns the reason when a phase's next group only waits for
// a person's approval.
func approvalGate(ph Phase) string {
	if len(ph.Groups) == 0 {
		return ""
	}
	for _, s := range ph.Groups[0].Steps {
		if s.Executor != step.Approval {
			return ""
		}
	}
	return ph.Groups[0].Steps[0].Reason
}

// phaseBuilders maps each phase of the plan's strategy to the function that
// lists its steps.
func phaseBuilders(p *v1alpha1.MigrationPlan) map[string]func(*planCtx, *phaseBuilder) {
	switch p.Spec.Strategy {
	case v1alpha1.StrategyAdopt:
		return map[string]func(*planCtx, *phaseBuilder){
			v1alpha1.PhaseCluster:      adoptCluster,
			v1alpha1.PhaseControlPlane: adoptControlPlane,
			v1alpha1.PhaseWorkers:      adoptWorkers,
			v1alpha1.PhaseRollout:      adoptRollout,
		}
	case v1alpha1.StrategyReplace:
		return map[string]func(*planCtx, *phaseBuilder){
			v1alpha1.PhasePrepare:        replacePrepare,
			v1alpha1.PhaseNetworkBridge:  replaceNetworkBridge,
			v1alpha1.PhaseInfrastructure: replaceInfrastructure,
			v1alpha1.PhaseWorkers:        replaceWorkers,
			v1alpha1.PhaseCutover:        replaceCutover,
			v1alpha1.PhaseCleanup:        replaceCleanup,
		}
	}
	return nil
}

// planCtx is the input of one Plan call, with the names every phase uses.
type planCtx struct {
	plan *v1alpha1.MigrationPlan
	snap *observed.Snapshot
	ns   string // the cluster's namespace
	name string // the cluster's name
	// inventory is what cleanup removes and leaves (cleanupInventory).
	inventory []InventoryItem
}

// phaseBuilder collects a phase's steps group by group, keeping only those
// whose done condition is false.
type phaseBuilder struct {
	ctx     *planCtx
	phase   Phase
	cur     []step.Step
	blocked []string
}

// step adds s to the current group unless done. The target's namespace
// defaults to the cluster's for Kubernetes kinds.
func (b *phaseBuilder) step(done bool, executor step.Kind, action step.Action, target step.Target, params step.Params, reason string) {
	b.stepWith(step.Inputs{}, done, executor, action, target, params, reason)
}

// stepWith is step for a step with inputs of its own (step.Inputs): those
// every step has, the cluster and its control plane, and the identity an
// openstack step authenticates with, are filled in here.
func (b *phaseBuilder) stepWith(in step.Inputs, done bool, executor step.Kind, action step.Action, target step.Target, params step.Params, reason string) {
	if done {
		b.phase.Done++
		return
	}
	if target.Namespace == "" && executor != step.OpenStack && executor != step.Approval && !step.ClusterScoped(target.Kind) {
		target.Namespace = b.ctx.ns
	}
	t := b.ctx.plan.Spec.Target
	in.Cluster = v1alpha1.ClusterRef{Namespace: b.ctx.ns, Name: b.ctx.name}
	in.ControlPlane = step.ObjectRef{Kind: t.ControlPlane.Provider, Name: t.ControlPlane.Name}
	if executor == step.OpenStack {
		id := t.Identity
		if id.From != nil {
			from := *id.From
			id.From = &from
		}
		in.Identity = &id
	}
	b.cur = append(b.cur, step.Step{
		Key:      b.key(action, target),
		Phase:    b.phase.Name,
		Executor: executor,
		Action:   action,
		Target:   target,
		Params:   params,
		Reason:   reason,
		Inputs:   &in,
	})
}

// key is the key of the phase's step that does action to target: what
// step gives it, and what a one-shot check is recorded under.
func (b *phaseBuilder) key(action step.Action, target step.Target) string {
	return step.Key(b.phase.Name, action, target)
}

// group ends the current group: the steps after it run once these are done.
func (b *phaseBuilder) group() {
	if len(b.cur) > 0 {
		b.phase.Groups = append(b.phase.Groups, step.Group{Steps: b.cur})
		b.cur = nil
	}
}

// block marks the phase Blocked with a reason, when it is the next to run.
func (b *phaseBuilder) block(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !slices.Contains(b.blocked, msg) {
		b.blocked = append(b.blocked, msg)
	}
}

func (b *phaseBuilder) finish() Phase {
	b.group()
	return b.phase
}
