package status

import (
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/step"
)

// The fixtures are a small adopt-like plan (cluster, control-plane,
// workers) with the step shapes the planner makes, at fixed times.

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// at is t0 plus n seconds.
func at(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }

const (
	rev1 = "4f1c2a9e8b7d6c5b4a39281706f5e4d3c2b1a090"
	rev2 = "9a8b7c6d5e4f30211203f4e5d6c7b8a998877665"
)

func mkStep(phase string, executor step.Kind, action step.Action, kind, ns, name string) step.Step {
	return step.Step{
		Key:      step.Key(phase, action, step.Target{Kind: kind, Name: name}),
		Phase:    phase,
		Executor: executor,
		Action:   action,
		Target:   step.Target{Kind: kind, Namespace: ns, Name: name},
	}
}

var (
	copySecret = mkStep("cluster", step.Kube, step.CopySecret, step.Secret, "default", "capi-quickstart-cloud-config")
	keypair    = mkStep("cluster", step.OpenStack, step.EnsureKeypair, step.Keypair, "", "capi-key")
	mkCluster  = mkStep("cluster", step.Kube, step.Create, step.Cluster, "default", "capi-quickstart")
	waitOSC    = mkStep("cluster", step.Kube, step.Wait, step.OpenStackCluster, "default", "capi-quickstart")
	mkKCP      = mkStep("control-plane", step.Kube, step.Create, step.KubeadmControlPlane, "default", "capi-quickstart-control-plane")
	waitKCP    = mkStep("control-plane", step.Kube, step.Wait, step.KubeadmControlPlane, "default", "capi-quickstart-control-plane")
	drain      = mkStep("workers", step.Workload, step.Drain, step.Node, "", "capi-quickstart-md-0-wq8fz")
	probe      = mkStep("workers", step.Workload, step.Probe, step.Node, "", "capi-quickstart-md-0-wq8fz")
)

func groups(steps ...[]step.Step) []step.Group {
	var gs []step.Group
	for _, s := range steps {
		gs = append(gs, step.Group{Steps: s})
	}
	return gs
}

func phase(name string, state planner.PhaseState, reason string, done int, gs ...[]step.Step) planner.Phase {
	return planner.Phase{Name: name, State: state, Reason: reason, Done: done, Groups: groups(gs...)}
}

// result is a planner result for plan capi-quickstart.
func result(approve, runnable, stopped string, phases ...planner.Phase) *planner.Result {
	return &planner.Result{
		Plan: "capi-quickstart", Cluster: "default/capi-quickstart", Strategy: "adopt",
		Provider: "KubeadmControlPlane", Approve: approve, Phases: phases,
		Stopped: stopped, Runnable: runnable,
	}
}

// freshResult is the plan with cluster approved and nothing done.
func freshResult() *planner.Result {
	return result("cluster", "cluster", "",
		phase("cluster", planner.Approved, "", 2, []step.Step{copySecret, keypair}, []step.Step{mkCluster}, []step.Step{waitOSC}),
		phase("control-plane", planner.Pending, "not approved: spec.approve is cluster", 0, []step.Step{mkKCP}, []step.Step{waitKCP}),
		phase("workers", planner.Pending, "not approved: spec.approve is cluster", 0, []step.Step{drain}, []step.Step{probe}),
	)
}

// evt is the result of one attempt at s, ending at second n.
func evt(s step.Step, outcome events.Outcome, attempt, n int, took time.Duration, msg, errText string) *events.ResultEvent {
	return &events.ResultEvent{
		Type: events.TypeResult, StepID: events.StepID("capi-quickstart", rev1, s.Phase, s.Key),
		Plan: "capi-quickstart", Revision: rev1, Phase: s.Phase, StepKey: s.Key, Executor: s.Executor,
		Outcome: outcome, Attempt: attempt, Duration: took, Report: events.Report{Message: msg},
		Error: errText, Terminal: outcome == events.Failed, At: at(n),
	}
}

func ok(s step.Step, attempt, n int) *events.ResultEvent {
	return evt(s, events.Succeeded, attempt, n, 1500*time.Millisecond, "done: "+string(s.Action)+" "+s.Target.String(), "")
}

// summary is a status in a few lines, for comparing in table tests.
func summary(st *PlanStatus) string {
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
		if ph.State == PhaseFailed || ph.State == PhaseBlocked {
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
