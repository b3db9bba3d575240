package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/kube"
	"github.com/ferry-dev/ferry/internal/observer"
	"github.com/ferry-dev/ferry/internal/step"
)

// KubeExecutor carries out the steps of kind "kube": it creates and patches
// the CAPI and CAPO objects of the management cluster, copies Secrets,
// pauses and unpauses, waits for controllers to report ready, and deletes
// the MachineDeployments a plan names.
//
// Every action is idempotent. Objects are created only when absent (an
// existing one is left as it is: the planner emits a create only for a
// missing object, and a second delivery finds its own work done); patches
// compare before they write; a pause ferry did not set is never lifted.
// Errors a person must fix (a missing source Secret, a node without a Nova
// server, a user's pause) are failure.Terminal; the others are retried.
type KubeExecutor struct {
	// Client reads and writes the management cluster; wait steps use its
	// Watch.
	Client client.WithWatch
	// Workload builds a client of the workload cluster from the kubeconfig
	// in its <cluster>-kubeconfig Secret, to read the running kubeadm
	// configuration; nil uses observer.NewWorkloadClient.
	Workload observer.WorkloadClientFunc
	// Logger receives a line before each change; nil uses slog.Default().
	Logger *slog.Logger
}

var _ Executor = (*KubeExecutor)(nil)

// NewKubeExecutor connects to the management cluster with ferry's scheme.
func NewKubeExecutor(cfg *rest.Config) (*KubeExecutor, error) {
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: kube.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("kube executor: client for %s: %w", cfg.Host, err)
	}
	return &KubeExecutor{Client: c}, nil
}

// Kind is step.Kube.
func (e *KubeExecutor) Kind() step.Kind { return step.Kube }

// kubeStep is one step being carried out, with what every action needs.
type kubeStep struct {
	ev   *events.StepEvent
	plan *v1alpha1.MigrationPlan
	log  *slog.Logger
	// key is the target object's namespace and name.
	key client.ObjectKey
}

func (s *kubeStep) param(name string) string { return s.ev.Step.Params[name] }

func (s *kubeStep) kind() string { return s.ev.Step.Target.Kind }

// target names the object for messages: "Cluster default/c1".
func (s *kubeStep) target() string { return s.kind() + " " + s.key.String() }

// cluster is the name of the plan's CAPI Cluster.
func (s *kubeStep) cluster() string { return s.plan.Spec.Cluster.Name }

// kubeHandler carries out one action on one kind.
type kubeHandler func(ctx context.Context, s *kubeStep) (events.Report, error)

// Execute carries out one kube step. See KubeExecutor for the guarantees.
func (e *KubeExecutor) Execute(ctx context.Context, ev *events.StepEvent) (events.Report, error) {
	if ev == nil || ev.Spec == nil {
		return events.Report{}, failure.Terminal(errors.New("kube executor: step carries no plan"))
	}
	st := ev.Step
	if st.Executor != step.Kube {
		return events.Report{}, failure.Terminal(fmt.Errorf("kube executor: step %s is for executor %q", st.Key, st.Executor))
	}
	h := e.handler(st.Action, st.Target.Kind)
	if h == nil {
		return events.Report{}, failure.Terminal(fmt.Errorf("kube executor: no action %q on kind %q (step %s)", st.Action, st.Target.Kind, st.Key))
	}
	ns := st.Target.Namespace
	if ns == "" {
		ns = ev.Spec.Spec.Cluster.Namespace
	}
	log := e.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &kubeStep{
		ev:   ev,
		plan: ev.Spec,
		log:  log.With("plan", ev.Plan, "phase", st.Phase, "step", st.Key, "revision", ev.Revision),
		key:  client.ObjectKey{Namespace: ns, Name: st.Target.Name},
	}
	return h(ctx, s)
}

// handler returns the function for an action on a kind, or nil when the
// kube executor does not do that.
func (e *KubeExecutor) handler(action step.Action, kind string) kubeHandler {
	switch action {
	case "copy-secret":
		if kind == kubeKindSecret {
			return e.copySecret
		}
	case "label":
		if kind == kubeKindSecret {
			return e.labelSecret
		}
	case "create":
		if b := e.builder(kind); b != nil {
			return func(ctx context.Context, s *kubeStep) (events.Report, error) { return e.create(ctx, s, b) }
		}
	case "patch":
		if kubePatchable[kind] {
			return e.patch
		}
	case "pause":
		if kind == kubeKindCluster || kind == kubeKindMD {
			return e.pause
		}
	case "unpause":
		if kubeUnpausable[kind] {
			return e.unpause
		}
	case "wait":
		if kubeWaitable[kind] {
			return e.wait
		}
	case "delete":
		if kind == kubeKindMD {
			return e.deleteMachineDeployment
		}
	}
	return nil
}

// get reads the step's target into obj. A missing object is a retryable
// error: the step that creates it runs in an earlier group, and the next
// attempt may find it.
func (e *KubeExecutor) get(ctx context.Context, s *kubeStep, obj client.Object) error {
	err := e.Client.Get(ctx, s.key, obj)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("get %s: not found", s.target())
	}
	if err != nil {
		return fmt.Errorf("get %s: %w", s.target(), err)
	}
	return nil
}

// kubeWriteError wraps an error of a write: a conflict means someone else
// changed the object since it was read, which the next attempt re-reads;
// an invalid object is a defect no retry fixes.
func kubeWriteError(what string, err error) error {
	switch {
	case apierrors.IsConflict(err):
		return fmt.Errorf("%s: changed by someone else meanwhile, the next attempt reads it again: %w", what, err)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsForbidden(err):
		return failure.Terminal(fmt.Errorf("%s: %w", what, err))
	}
	return fmt.Errorf("%s: %w", what, err)
}

// kubeSplitPair splits "a<sep>b" around the first sep; ok is false when
// either side is empty.
func kubeSplitPair(s, sep string) (a, b string, ok bool) {
	a, b, found := strings.Cut(s, sep)
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	return a, b, found && a != "" && b != ""
}
