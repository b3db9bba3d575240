package statustest

import (
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/step"
)

// The fixtures are a small adopt-like plan (cluster, control-plane,
// workers) with the step shapes the planner makes, at fixed times.

// T0 is when the fixtures' clock starts.
var T0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// At is T0 plus n seconds.
func At(n int) time.Time { return T0.Add(time.Duration(n) * time.Second) }

// Rev1 and Rev2 are the plan's revisions, in the order they were pushed.
const (
	Rev1 = "4f1c2a9e8b7d6c5b4a39281706f5e4d3c2b1a090"
	Rev2 = "9a8b7c6d5e4f30211203f4e5d6c7b8a998877665"
)

// Step is a step of phase as the planner makes it, its key from step.Key.
func Step(phase string, executor step.Kind, action step.Action, kind, ns, name string) step.Step {
	return step.Step{
		Key:      step.Key(phase, action, step.Target{Kind: kind, Name: name}),
		Phase:    phase,
		Executor: executor,
		Action:   action,
		Target:   step.Target{Kind: kind, Namespace: ns, Name: name},
	}
}

// The plan's steps: cluster's four, control-plane's two, workers' two.
var (
	CopySecret = Step("cluster", step.Kube, step.CopySecret, step.Secret, "default", "capi-quickstart-cloud-config")
	Keypair    = Step("cluster", step.OpenStack, step.EnsureKeypair, step.Keypair, "", "capi-key")
	MkCluster  = Step("cluster", step.Kube, step.Create, step.Cluster, "default", "capi-quickstart")
	WaitOSC    = Step("cluster", step.Kube, step.Wait, step.OpenStackCluster, "default", "capi-quickstart")
	MkKCP      = Step("control-plane", step.Kube, step.Create, step.KubeadmControlPlane, "default", "capi-quickstart-control-plane")
	WaitKCP    = Step("control-plane", step.Kube, step.Wait, step.KubeadmControlPlane, "default", "capi-quickstart-control-plane")
	Drain      = Step("workers", step.Workload, step.Drain, step.Node, "", "capi-quickstart-md-0-wq8fz")
	Probe      = Step("workers", step.Workload, step.Probe, step.Node, "", "capi-quickstart-md-0-wq8fz")
)

func groups(steps ...[]step.Step) []step.Group {
	var gs []step.Group
	for _, s := range steps {
		gs = append(gs, step.Group{Steps: s})
	}
	return gs
}

// Phase is the planner's view of one phase: its state, why, how many
// steps are done, and the groups of steps left.
func Phase(name string, state planner.PhaseState, reason string, done int, gs ...[]step.Step) planner.Phase {
	return planner.Phase{Name: name, State: state, Reason: reason, Done: done, Groups: groups(gs...)}
}

// Result is a planner result for plan capi-quickstart.
func Result(approve, runnable, stopped string, phases ...planner.Phase) *planner.Result {
	return &planner.Result{
		Plan: "capi-quickstart", Cluster: "default/capi-quickstart", Strategy: "adopt",
		Provider: "KubeadmControlPlane", Approve: approve, Phases: phases,
		Stopped: stopped, Runnable: runnable,
	}
}

// FreshResult is the plan with cluster approved and nothing done.
func FreshResult() *planner.Result {
	return Result("cluster", "cluster", "",
		Phase("cluster", planner.Approved, "", 2, []step.Step{CopySecret, Keypair}, []step.Step{MkCluster}, []step.Step{WaitOSC}),
		Phase("control-plane", planner.Pending, "not approved: spec.approve is cluster", 0, []step.Step{MkKCP}, []step.Step{WaitKCP}),
		Phase("workers", planner.Pending, "not approved: spec.approve is cluster", 0, []step.Step{Drain}, []step.Step{Probe}),
	)
}

// ClusterLeft is the fresh plan after CopySecret and Keypair are done.
func ClusterLeft(done int, steps ...[]step.Step) *planner.Result {
	r := FreshResult()
	r.Phases[0] = Phase("cluster", planner.Approved, "", done, steps...)
	return r
}

// Event is the result of one attempt at s, ending at second n.
func Event(s step.Step, outcome events.Outcome, attempt, n int, took time.Duration, msg, errText string) *events.ResultEvent {
	return &events.ResultEvent{
		Type: events.TypeResult, StepID: events.StepID("capi-quickstart", Rev1, s.Phase, s.Key),
		Plan: "capi-quickstart", Revision: Rev1, Phase: s.Phase, StepKey: s.Key, Executor: s.Executor,
		Outcome: outcome, Attempt: attempt, Duration: took, Report: events.Report{Message: msg},
		Error: errText, Terminal: outcome == events.Failed, At: At(n),
	}
}

// OK is the success of attempt at s, ending at second n.
func OK(s step.Step, attempt, n int) *events.ResultEvent {
	return Event(s, events.Succeeded, attempt, n, 1500*time.Millisecond, "done: "+string(s.Action)+" "+s.Target.String(), "")
}

// Op is one thing the reconciler loop does to a status.
type Op func(*status.PlanStatus) *status.PlanStatus

// Plan merges res, planned at rev at second n (status.FromResult).
func Plan(res *planner.Result, rev string, n int) Op {
	return func(st *status.PlanStatus) *status.PlanStatus { return status.FromResult(st, res, rev, At(n)) }
}

// Publish marks steps published at second n (status.Published).
func Publish(n int, steps ...step.Step) Op {
	return func(st *status.PlanStatus) *status.PlanStatus { status.Published(st, steps, At(n)); return st }
}

// Apply takes in an executor's result (status.ApplyResult).
func Apply(ev *events.ResultEvent) Op {
	return func(st *status.PlanStatus) *status.PlanStatus { status.ApplyResult(st, ev); return st }
}

// Run applies ops in order to no status.
func Run(ops ...Op) *status.PlanStatus {
	var st *status.PlanStatus
	for _, o := range ops {
		st = o(st)
	}
	return st
}

// Summary is a status in a few lines, for comparing in table tests.
func Summary(st *status.PlanStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "approved=%s", st.Approved)
	if st.Stopped != "" {
		b.WriteString(" stopped")
	}
	if len(st.Checks) > 0 {
		fmt.Fprintf(&b, " checks=%s", strings.Join(st.Checks, ","))
	}
	for _, r := range st.Created {
		fmt.Fprintf(&b, " created=%s/%s", r.Kind, r.Name)
	}
	b.WriteString("\n")
	for _, ph := range st.Phases {
		fmt.Fprintf(&b, "%s %s %d/%d", ph.Name, ph.State, ph.Done, ph.Left)
		if ph.State == status.PhaseFailed || ph.State == status.PhaseBlocked {
			fmt.Fprintf(&b, " (%s)", ph.Reason)
		}
		b.WriteString(":")
		for _, s := range ph.Steps {
			fmt.Fprintf(&b, " %s/%s=%s", s.Action, path.Base(s.Target[strings.LastIndex(s.Target, " ")+1:]), s.State)
			if s.Attempts > 0 {
				fmt.Fprintf(&b, "#%d", s.Attempts)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
