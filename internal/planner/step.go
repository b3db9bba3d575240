package planner

import (
	"fmt"
	"sort"
	"strings"
)

// Executor kinds: who carries a step out.
const (
	// ExecKube changes objects in the management cluster.
	ExecKube = "kube"
	// ExecOpenStack talks to the OpenStack APIs.
	ExecOpenStack = "openstack"
	// ExecWorkload changes the workload cluster through its kubeconfig.
	ExecWorkload = "workload"
	// ExecApproval is not an executor: the step waits for a person to
	// approve the next phase, and nothing is published for it.
	ExecApproval = "approval"
)

// Step is one idempotent change or wait, as data. It never carries a
// secret's value: Secrets appear by name only.
type Step struct {
	// Key identifies the step within its plan: phase/action/kind/name. The
	// event layer derives the message ID from it, the plan and the revision.
	Key string `json:"key"`
	// Phase the step belongs to.
	Phase string `json:"phase"`
	// Executor is the kind of executor that runs it (ExecKube, ...).
	Executor string `json:"executor"`
	// Action is what the executor does: create, patch, pause, unpause, wait,
	// copy-secret, apply, cordon, drain, probe, delete, resolve,
	// check-quota, ensure-keypair, await-approval.
	Action string `json:"action"`
	// Target is the object the step acts on.
	Target Target `json:"target"`
	// Params are the values the executor needs, by name.
	Params map[string]string `json:"params,omitempty"`
	// Reason says why the step is needed, for the preview and the status.
	Reason string `json:"reason,omitempty"`
}

// Target names an object: a Kubernetes kind in the cluster's namespace (or
// another namespace when set), or an OpenStack resource kind.
type Target struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

func (t Target) String() string {
	if t.Namespace != "" {
		return t.Kind + " " + t.Namespace + "/" + t.Name
	}
	return t.Kind + " " + t.Name
}

// String reads as one line of a pull-request comment:
// "kube: create Cluster default/c (paused=true, ...) - reason".
func (s Step) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s %s", s.Executor, s.Action, s.Target)
	if len(s.Params) > 0 {
		keys := make([]string, 0, len(s.Params))
		for k := range s.Params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString(" (")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s=%s", k, s.Params[k])
		}
		b.WriteString(")")
	}
	if s.Reason != "" {
		b.WriteString(": ")
		b.WriteString(s.Reason)
	}
	return b.String()
}

// Group is steps that may run in parallel; a plan's groups run one after
// the other.
type Group struct {
	Steps []Step `json:"steps"`
}

// PhaseState is where a phase stands, as far as the observed state tells.
// The status adds Running and Failed from the executors' results.
type PhaseState string

const (
	// Pending: not approved yet; nothing of it runs.
	Pending PhaseState = "Pending"
	// Approved: approved with steps left; runnable once the phases before it
	// succeeded.
	Approved PhaseState = "Approved"
	// Succeeded: every step's effect is present.
	Succeeded PhaseState = "Succeeded"
	// Blocked: a health check failed or the input is incomplete; Reason
	// says which. Nothing of it runs until the cause goes away.
	Blocked PhaseState = "Blocked"
)

// Phase is one phase of a plan and the steps it has left.
type Phase struct {
	Name  string     `json:"name"`
	State PhaseState `json:"state"`
	// Reason explains Blocked, and why an Approved phase is not next.
	Reason string `json:"reason,omitempty"`
	// Groups are the steps left, in order; a step whose effect is already
	// present is not listed.
	Groups []Group `json:"groups,omitempty"`
	// Done counts the steps whose effect is already present.
	Done int `json:"done"`
}

// Result is the plan's phases against the observed state.
type Result struct {
	Plan     string  `json:"plan"`
	Cluster  string  `json:"cluster"`
	Strategy string  `json:"strategy"`
	Provider string  `json:"provider"`
	Approve  string  `json:"approve"`
	Phases   []Phase `json:"phases"`
	// Stopped says why no step may run at all (approval moved backwards).
	Stopped string `json:"stopped,omitempty"`
	// Runnable is the phase whose first group runs next; empty when none.
	Runnable string `json:"runnable,omitempty"`
}

// Next returns the group to publish now: the first group of the runnable
// phase, or nil when nothing may run.
func (r *Result) Next() *Group {
	if r.Runnable == "" {
		return nil
	}
	for i := range r.Phases {
		p := &r.Phases[i]
		if p.Name == r.Runnable && len(p.Groups) > 0 {
			return &p.Groups[0]
		}
	}
	return nil
}

// Phase returns the named phase, or nil.
func (r *Result) Phase(name string) *Phase {
	for i := range r.Phases {
		if r.Phases[i].Name == name {
			return &r.Phases[i]
		}
	}
	return nil
}
