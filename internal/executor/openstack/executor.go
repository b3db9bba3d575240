package openstack

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/executor"
	"github.com/ferry-dev/ferry/internal/failure"
	osclient "github.com/ferry-dev/ferry/internal/openstack"
	"github.com/ferry-dev/ferry/internal/redact"
	"github.com/ferry-dev/ferry/internal/step"
)

// CloudOps is what the openstack executor needs of an OpenStack client.
type CloudOps interface {
	Resolve(ctx context.Context, kind osclient.Kind, name string) (string, error)
	EnsureKeypair(ctx context.Context, name, publicKey string) (created bool, err error)
	DeleteKeypair(ctx context.Context, name string) (deleted bool, err error)
	FlavorSize(ctx context.Context, name string) (vcpus, ramMiB int, err error)
	Shortfall(ctx context.Context, need osclient.Need) (string, error)
	Cleanup(ctx context.Context, plan string, recorded []osclient.Resource) ([]osclient.Resource, error)
	ServerBinding(ctx context.Context, id string) (*osclient.ServerBinding, error)
}

var _ CloudOps = (*osclient.Client)(nil)

// Executor carries out the steps on the OpenStack side: the
// preflight (names resolve, quota covers the new machines), the SSH keypair,
// the binding of adopted servers to CAPO's OpenStackServers, and the
// clean-up of what ferry created. It authenticates with the identity of
// the step's inputs (the plan's identity Secret, or the Secret it is
// copied from), read from the management cluster for each step, so a
// rotated password is picked up.
type Executor struct {
	// Client reads Secrets in the management cluster and writes the
	// OpenStackServers of adopted servers.
	Client client.Client
	// Connect opens the cloud; nil uses osclient.Connect.
	Connect func(ctx context.Context, creds osclient.Credentials) (CloudOps, error)
}

var _ executor.Executor = (*Executor)(nil)

// Kind is step.OpenStack.
func (e *Executor) Kind() step.Kind { return step.OpenStack }

// Execute runs one openstack step. Its error and its report's message are
// scrubbed (internal/redact) before the worker publishes them: the
// client's errors are already, and this keeps a message built here from
// what the cloud answered to the same rule.
func (e *Executor) Execute(ctx context.Context, ev *events.StepEvent) (events.Report, error) {
	report, err := e.execute(ctx, ev)
	report.Message = redact.Scrub(report.Message)
	return report, redact.Error(err)
}

func (e *Executor) execute(ctx context.Context, ev *events.StepEvent) (events.Report, error) {
	in := &ev.Inputs
	if in.Identity == nil || in.Cluster.Namespace == "" {
		return events.Report{}, failure.Terminal(errors.New("step event carries no OpenStack identity and cluster in its inputs"))
	}
	creds, err := osclient.IdentityCredentials(ctx, e.Client, in.Cluster.Namespace, *in.Identity)
	if err != nil {
		return events.Report{}, err
	}
	connect := e.Connect
	if connect == nil {
		connect = func(ctx context.Context, c osclient.Credentials) (CloudOps, error) { return osclient.Connect(ctx, c) }
	}
	cloud, err := connect(ctx, creds)
	if err != nil {
		return events.Report{}, err
	}
	s := ev.Step
	switch {
	case s.Action == step.Resolve:
		return resolveAll(ctx, cloud, ev)
	case s.Action == step.CheckQuota:
		short, err := osclient.QuotaShortfall(ctx, cloud, in.Machines, func(string) bool { return true })
		if err != nil {
			return events.Report{}, err
		}
		if short != "" {
			// A person must raise the quota or shrink the plan.
			return events.Report{}, failure.Terminal(fmt.Errorf("OpenStack quota does not cover the new machines: %s", short))
		}
		return events.Report{Message: "the quota covers the new machines"}, nil
	case s.Action == step.EnsureKeypair:
		name := s.Target.Name
		created, err := cloud.EnsureKeypair(ctx, name, in.PublicKey)
		if err != nil {
			return events.Report{}, err
		}
		if !created {
			return events.Report{Message: "keypair " + name + " exists"}, nil
		}
		return events.Report{Message: "created keypair " + name,
			Created: []events.Resource{{Kind: osclient.ResourceKeypair, Name: name}}}, nil
	case s.Action == step.Delete && s.Target.Kind == step.Keypair:
		// The planner asks only for a keypair the status records as
		// ferry's: a rollback of the phase that created it.
		deleted, err := cloud.DeleteKeypair(ctx, s.Target.Name)
		switch {
		case err != nil:
			return events.Report{}, err
		case !deleted:
			return events.Report{Message: "keypair " + s.Target.Name + " is gone already"}, nil
		}
		return events.Report{Message: "deleted keypair " + s.Target.Name + ", which ferry created"}, nil
	case s.Action == step.Bind && s.Target.Kind == step.OpenStackServer:
		return e.bindServer(ctx, cloud, ev)
	case s.Action == step.Delete && s.Target.Kind == step.TaggedResources:
		deleted, err := cloud.Cleanup(ctx, ev.Plan, recorded(s.Params.List(step.ParamRecorded)))
		var names []string
		for _, r := range deleted {
			names = append(names, r.String())
		}
		msg := "deleted nothing: no resource of this plan left"
		if len(names) > 0 {
			msg = "deleted " + strings.Join(names, ", ")
		}
		return events.Report{Message: msg}, err
	}
	return events.Report{}, failure.Terminal(fmt.Errorf("the openstack executor cannot %s %s", s.Action, s.Target))
}

// resolveAll resolves every name of the step's inputs (those the plan
// gives); all failures are reported together.
func resolveAll(ctx context.Context, cloud CloudOps, ev *events.StepEvent) (events.Report, error) {
	var errs []error
	var ok []string
	for _, n := range ev.Inputs.CloudNames {
		id, err := cloud.Resolve(ctx, osclient.Kind(n.Kind), n.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ok = append(ok, n.Key()+"="+id)
	}
	if err := errors.Join(errs...); err != nil {
		return events.Report{}, err
	}
	return events.Report{Message: "resolved " + strings.Join(ok, ", ")}, nil
}

// recorded parses "kind/name" items into resources ferry recorded;
// malformed ones are skipped: clean-up deletes only what it can name.
func recorded(items []string) []osclient.Resource {
	var out []osclient.Resource
	for _, item := range items {
		if kind, name, ok := step.SplitPair(item, "/"); ok {
			out = append(out, osclient.Resource{Kind: kind, Name: name})
		}
	}
	return out
}
