package workload

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/executor"
	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/kube"
	"github.com/ferry-dev/ferry/internal/step"
)

// Annotations the workload executor puts on every object it applies, so
// that a person looking at the workload cluster can tell which plan, at
// which reviewed commit, put it there.
const (
	// AnnotationPlan names the MigrationPlan that applied the object.
	AnnotationPlan = "ferry.dev/plan"
	// AnnotationRevision is the plans repository's revision the object was
	// applied from.
	AnnotationRevision = "ferry.dev/revision"
)

// defaultProbeTimeout bounds a probe: the planner gives probes no timeout
// parameter, and an application that takes longer than this to answer a
// health check is not answering.
const defaultProbeTimeout = 10 * time.Second

// ClientsetFunc builds a client-go clientset from the kubeconfig in a
// cluster's <cluster>-kubeconfig Secret. The drain helper and the watches
// of wait steps need one; everything else uses the controller-runtime
// client.
type ClientsetFunc func(kubeconfig []byte) (kubernetes.Interface, error)

// NewWorkloadClientset returns a clientset for a kubeconfig, reused across
// steps (kube.WorkloadClientset).
func NewWorkloadClientset(kubeconfig []byte) (kubernetes.Interface, error) {
	return kube.WorkloadClientset(kubeconfig)
}

// Executor carries out the steps of kind "workload": it changes the
// migrated cluster itself, reached through the <cluster>-kubeconfig Secret
// in the management cluster. Actions: apply and wait on manifests from the
// plans repository, wait for a LoadBalancer Service's address, cordon,
// drain and delete Nodes, and probe a URL between drains.
//
// Every action is idempotent: a cordoned node is cordoned, a drained node
// has nothing left to evict, an applied manifest is applied again with the
// same result, a Node already gone is deleted.
type Executor struct {
	// Client reads the management cluster, where the kubeconfig Secret is.
	Client client.Client
	// Workload builds the workload cluster's controller-runtime client;
	// nil uses kube.WorkloadClient.
	Workload kube.ClientFunc
	// Clientset builds the workload cluster's client-go clientset from the
	// same kubeconfig; nil uses NewWorkloadClientset.
	Clientset ClientsetFunc
	// Repo returns the plans repository at a revision; manifest paths are
	// relative to its root. Required for apply and wait on manifests.
	Repo func(ctx context.Context, revision string) (fs.FS, error)
	// HTTPClient sends probes; nil uses a client with no timeout of its own
	// (each probe sets one).
	HTTPClient HTTPDoer
	// Logger receives a line before each change; nil uses slog.Default().
	Logger *slog.Logger
}

var _ executor.Executor = (*Executor)(nil)

// Kind is step.Workload.
func (e *Executor) Kind() step.Kind { return step.Workload }

// job is one step being carried out, with what every action needs.
type job struct {
	ev  *events.StepEvent
	log *slog.Logger
}

func (s *job) param(name string) string { return s.ev.Step.Params[name] }

// timeout reads the step's timeout parameter, falling back to def. A
// timeout that does not parse is a defect of the plan or the planner that
// no retry fixes.
func (s *job) timeout(def time.Duration) (time.Duration, error) {
	v := s.param("timeout")
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, failure.Terminal(fmt.Errorf("timeout parameter %q is not a positive duration", v))
	}
	return d, nil
}

// Execute carries out one workload step.
func (e *Executor) Execute(ctx context.Context, ev *events.StepEvent) (events.Report, error) {
	if ev.Spec == nil {
		return events.Report{}, failure.Terminal(fmt.Errorf("step %s carries no plan", ev.Step.Key))
	}
	log := e.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &job{ev: ev, log: log.With(
		"plan", ev.Plan, "phase", ev.Step.Phase, "step", ev.Step.Key, "revision", ev.Revision)}

	target := ev.Step.Target
	switch a := ev.Step.Action; {
	case a == "probe":
		// A probe talks to the application, not to the cluster: no
		// kubeconfig needed.
		return e.probe(ctx, s)
	case a == "apply" && target.Kind == "Manifest":
		c, err := e.connect(ctx, ev.Spec)
		if err != nil {
			return events.Report{}, err
		}
		return e.apply(ctx, s, c)
	case a == "wait" && target.Kind == "Manifest":
		cs, err := e.connectClientset(ctx, ev.Spec)
		if err != nil {
			return events.Report{}, err
		}
		return e.waitManifest(ctx, s, cs)
	case a == "wait" && target.Kind == "Service":
		cs, err := e.connectClientset(ctx, ev.Spec)
		if err != nil {
			return events.Report{}, err
		}
		return waitService(ctx, s, cs)
	case a == "set-provider-id" && target.Kind == "Node":
		cs, err := e.connectClientset(ctx, ev.Spec)
		if err != nil {
			return events.Report{}, err
		}
		return setProviderID(ctx, s, cs)
	case (a == "cordon" || a == "drain" || a == "delete") && target.Kind == "Node":
		cs, err := e.connectClientset(ctx, ev.Spec)
		if err != nil {
			return events.Report{}, err
		}
		switch a {
		case "cordon":
			return cordonNode(ctx, s, cs)
		case "drain":
			return drainNode(ctx, s, cs)
		default:
			return deleteNode(ctx, s, cs)
		}
	}
	return events.Report{}, failure.Terminal(fmt.Errorf("workload executor: no action %q on %s", ev.Step.Action, target.Kind))
}

// kubeconfig reads the workload cluster's kubeconfig from the management
// cluster.
func (e *Executor) kubeconfig(ctx context.Context, p *v1alpha1.MigrationPlan) ([]byte, string, error) {
	return kube.ReadKubeconfig(ctx, e.Client, p.Spec.Cluster.Namespace, p.Spec.Cluster.Name)
}

// errUnusableKubeconfig is what a kubeconfig that does not parse becomes:
// the parser's own message may quote the file, which holds credentials.
func errUnusableKubeconfig(where string) error {
	return failure.Terminal(fmt.Errorf("kubeconfig in %s is not usable", where))
}

func (e *Executor) connect(ctx context.Context, p *v1alpha1.MigrationPlan) (client.Client, error) {
	kc, where, err := e.kubeconfig(ctx, p)
	if err != nil {
		return nil, err
	}
	build := e.Workload
	if build == nil {
		build = kube.WorkloadClient
	}
	c, err := build(kc)
	if err != nil {
		return nil, errUnusableKubeconfig(where)
	}
	return c, nil
}

func (e *Executor) connectClientset(ctx context.Context, p *v1alpha1.MigrationPlan) (kubernetes.Interface, error) {
	kc, where, err := e.kubeconfig(ctx, p)
	if err != nil {
		return nil, err
	}
	build := e.Clientset
	if build == nil {
		build = NewWorkloadClientset
	}
	cs, err := build(kc)
	if err != nil {
		return nil, errUnusableKubeconfig(where)
	}
	return cs, nil
}
