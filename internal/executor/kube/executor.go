package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/executor"
	"github.com/ferry-dev/ferry/internal/failure"
	kubeclient "github.com/ferry-dev/ferry/internal/kube"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/step"
)

// Executor carries out the steps of kind step.Kube: it creates and patches
// the CAPI and CAPO objects of the management cluster, copies Secrets,
// pauses and unpauses, waits for controllers to report ready, and deletes
// the MachineDeployments a plan names (only those prepare labelled
// observed.LabelReplacedBy, or that ferry created), and builds and
// deletes the plan's gateway OpenStackServers (only those it labelled).
// What it deletes carries ferry's label, which deploy/'s admission policy
// checks as well.
//
// Every action is idempotent. Objects are created only when absent (an
// existing one is left as it is: the planner emits a create only for a
// missing object, and a second delivery finds its own work done); patches
// compare before they write; a pause ferry did not set is never lifted.
// Errors a person must fix (a missing source Secret, a node without a Nova
// server, a user's pause) are failure.Terminal; the others are retried.
type Executor struct {
	// Client reads and writes the management cluster; wait steps use its
	// Watch.
	Client client.WithWatch
	// Workload builds a client of the workload cluster from the kubeconfig
	// in its <cluster>-kubeconfig Secret, to read the running kubeadm
	// configuration; nil uses kubeclient.WorkloadClient.
	Workload kubeclient.ClientFunc
}

var _ executor.Executor = (*Executor)(nil)

// New connects to the management cluster with ferry's scheme.
func New(cfg *rest.Config) (*Executor, error) {
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: kubeclient.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("kube executor: client for %s: %w", cfg.Host, err)
	}
	return &Executor{Client: c}, nil
}

// Kind is step.Kube.
func (e *Executor) Kind() step.Kind { return step.Kube }

// job is one step being carried out, with what every action needs.
type job struct {
	ev  *events.StepEvent
	log *slog.Logger
	// key is the target object's namespace and name.
	key client.ObjectKey
}

// params are the step's parameters; their getters are the only parsers.
func (s *job) params() step.Params { return s.ev.Step.Params }

// paramError says which step a parameter that does not parse belongs to;
// it stays terminal.
func (s *job) paramError(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %s: %w", s.ev.Step.Action, s.target(), err)
}

func (s *job) kind() string { return s.ev.Step.Target.Kind }

// target names the object for messages: "Cluster default/c1".
func (s *job) target() string { return s.kind() + " " + s.key.String() }

// inputs are what the step needs of the plan besides its parameters.
func (s *job) inputs() *step.Inputs { return &s.ev.Inputs }

// cluster is the name of the plan's CAPI Cluster.
func (s *job) cluster() string { return s.ev.Inputs.Cluster.Name }

// clusterNamespace is the namespace of the plan's CAPI Cluster, where its
// kubeconfig Secret is.
func (s *job) clusterNamespace() string { return s.ev.Inputs.Cluster.Namespace }

// handler carries out one action on one kind.
type handler func(ctx context.Context, s *job) (events.Report, error)

// Execute carries out one kube step. See Executor for the guarantees.
func (e *Executor) Execute(ctx context.Context, ev *events.StepEvent) (events.Report, error) {
	if ev == nil || ev.Inputs.Cluster.Name == "" || ev.Inputs.Cluster.Namespace == "" {
		return events.Report{}, failure.Terminal(errors.New("kube executor: step carries no cluster in its inputs"))
	}
	st := ev.Step
	if st.Executor != step.Kube {
		return events.Report{}, failure.Terminal(fmt.Errorf("kube executor: step %s is for executor %q", st.Key, st.Executor))
	}
	h := e.handlerFor(st.Action, st.Target.Kind)
	if h == nil {
		return events.Report{}, failure.Terminal(fmt.Errorf("kube executor: no action %q on kind %q (step %s)", st.Action, st.Target.Kind, st.Key))
	}
	ns := st.Target.Namespace
	if ns == "" {
		ns = ev.Inputs.Cluster.Namespace
	}
	s := &job{
		ev:  ev,
		log: logging.From(ctx),
		key: client.ObjectKey{Namespace: ns, Name: st.Target.Name},
	}
	return h(ctx, s)
}

// handler returns the function for an action on a kind, or nil when the
// kube executor does not do that.
func (e *Executor) handlerFor(action step.Action, kind string) handler {
	switch action {
	case step.CopySecret:
		if kind == step.Secret {
			return e.copySecret
		}
	case step.Label:
		if kind == step.Secret {
			return e.labelSecret
		}
	case step.Create:
		if kind == step.OpenStackServer {
			return e.createGateway
		}
		if b := e.builderFor(kind); b != nil {
			return func(ctx context.Context, s *job) (events.Report, error) { return e.create(ctx, s, b) }
		}
	case step.Patch:
		if patchable[kind] {
			return e.patch
		}
	case step.Pause:
		if kind == step.Cluster || kind == step.MachineDeployment {
			return e.pause
		}
	case step.Unpause:
		if unpausable[kind] {
			return e.unpause
		}
	case step.Wait:
		if waitable[kind] {
			return e.wait
		}
	case step.Remove:
		if _, ok := gvkOf(kind); ok {
			return e.remove
		}
	case step.Release:
		if kind == step.Secret || kind == step.KamajiControlPlane {
			return e.release
		}
	case step.Restore:
		if kind == step.KamajiControlPlane || kind == step.Cluster {
			return e.restore
		}
	case step.Delete:
		if kind == step.MachineDeployment {
			return e.deleteMachineDeployment
		}
		if kind == step.OpenStackServer {
			return e.deleteGateway
		}
		if kind == step.OpenStackCluster {
			return e.deleteCreated
		}
	}
	return nil
}

// get reads the step's target into obj. A missing object is a retryable
// error: the step that creates it runs in an earlier group, and the next
// attempt may find it.
func (e *Executor) get(ctx context.Context, s *job, obj client.Object) error {
	err := e.Client.Get(ctx, s.key, obj)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("get %s: not found", s.target())
	}
	if err != nil {
		return fmt.Errorf("get %s: %w", s.target(), err)
	}
	return nil
}
