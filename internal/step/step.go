package step

import (
	"fmt"
	"sort"
	"strings"
)

// Kind is the kind of executor that carries a step out; it names the
// events subject and the durable consumer the step goes through.
type Kind string

// Executor kinds.
const (
	// Kube changes objects in the management cluster.
	Kube Kind = "kube"
	// OpenStack talks to the OpenStack APIs.
	OpenStack Kind = "openstack"
	// Workload changes the workload cluster through its kubeconfig.
	Workload Kind = "workload"
	// Approval is not an executor: the step waits for a person to
	// approve the next phase, and nothing is published for it.
	Approval Kind = "approval"
)

// Step is one idempotent change or wait, as data. It never carries a
// secret's value: Secrets appear by name only.
type Step struct {
	// Key identifies the step within its plan: Key(Phase, Action, Target),
	// read back with ParseKey. The event layer derives the message ID from
	// it, the plan and the revision.
	Key string `json:"key"`
	// Phase the step belongs to.
	Phase string `json:"phase"`
	// Executor is the kind of executor that runs it.
	Executor Kind `json:"executor"`
	// Action is what the executor does to the target.
	Action Action `json:"action"`
	// Target is the object the step acts on.
	Target Target `json:"target"`
	// Params are the values the executor needs, by name (see Params).
	Params Params `json:"params,omitempty"`
	// Reason says why the step is needed, for the preview and the status.
	Reason string `json:"reason,omitempty"`
	// Inputs are what the executor needs of the plan besides Params (see
	// Inputs). They are not part of the step's JSON, which the status and
	// `reconciler plan -o json` show: the step event carries them beside
	// the step (events.NewStepEvent moves them there).
	Inputs *Inputs `json:"-"`
}

// Target names an object: a Kubernetes kind in the cluster's namespace (or
// another namespace when set), or an OpenStack resource kind. Kind is one
// of this package's target kinds (Secret, Cluster, ...).
type Target struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// String reads "Kind namespace/name", or "Kind name" without a namespace.
func (t Target) String() string {
	if t.Namespace != "" {
		return t.Kind + " " + t.Namespace + "/" + t.Name
	}
	return t.Kind + " " + t.Name
}

// String reads as one line of a pull-request comment:
// "kube: create Cluster default/c (paused=true, ...): reason". The
// parameters are sorted by key so that the same step always reads the same.
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
