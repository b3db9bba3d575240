package workload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/kube"
)

// defaultWaitTimeout bounds a wait step that carries no timeout.
var defaultWaitTimeout = mustParseDefault(v1alpha1.DefaultWaitTimeout)

func mustParseDefault(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(fmt.Sprintf("executor: default duration %q: %v", s, err))
	}
	return d
}

// waitManifest waits until every DaemonSet and Deployment of a manifest is
// available, by the same rule the observer reports a manifest healthy
// with, so that the planner agrees the step is done once it returns.
func (e *Executor) waitManifest(ctx context.Context, s *job, cs kubernetes.Interface) (events.Report, error) {
	path := s.ev.Step.Target.Name
	timeout, err := s.timeout(defaultWaitTimeout)
	if err != nil {
		return events.Report{}, err
	}
	objs, err := e.readManifest(ctx, s)
	if err != nil {
		return events.Report{}, err
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var waited []string
	for _, u := range objs {
		if !isPodController(u) {
			continue
		}
		ns := u.GetNamespace()
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		name := u.GetName()
		s.log.InfoContext(ctx, "waiting for the workload to be available", "manifest", path, "kind", u.GetKind(), "namespace", ns, "name", name)
		state, err := waitAvailable(ctx, cs, u.GetKind(), ns, name)
		if err != nil {
			return events.Report{}, fmt.Errorf("wait for manifest %s: %s %s/%s: %w", path, u.GetKind(), ns, name, describeWaitError(parent, err, timeout, state))
		}
		waited = append(waited, u.GetKind()+" "+ns+"/"+name)
	}
	if len(waited) == 0 {
		return events.Report{Message: fmt.Sprintf("manifest %s has no DaemonSet or Deployment to wait for", path)}, nil
	}
	return events.Report{Message: fmt.Sprintf("manifest %s available: %s", path, strings.Join(waited, ", "))}, nil
}

// waitAvailable watches a DaemonSet or a Deployment until all its pods
// are available at its current generation; it returns what it saw last.
func waitAvailable(ctx context.Context, cs kubernetes.Interface, kind, ns, name string) (string, error) {
	switch kind {
	case "DaemonSet":
		api := cs.AppsV1().DaemonSets(ns)
		return waitFor(ctx, name, &appsv1.DaemonSet{},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return api.List(ctx, o) },
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return api.Watch(ctx, o) },
			func(obj runtime.Object) (bool, string, error) {
				ds := obj.(*appsv1.DaemonSet)
				st := ds.Status
				return st.ObservedGeneration >= ds.Generation && st.NumberAvailable == st.DesiredNumberScheduled,
					fmt.Sprintf("%d of %d pods available, generation %d observed %d", st.NumberAvailable, st.DesiredNumberScheduled, ds.Generation, st.ObservedGeneration), nil
			})
	case "Deployment":
		api := cs.AppsV1().Deployments(ns)
		return waitFor(ctx, name, &appsv1.Deployment{},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return api.List(ctx, o) },
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return api.Watch(ctx, o) },
			func(obj runtime.Object) (bool, string, error) {
				d := obj.(*appsv1.Deployment)
				want := int32(1)
				if d.Spec.Replicas != nil {
					want = *d.Spec.Replicas
				}
				return d.Status.AvailableReplicas >= want && d.Status.ObservedGeneration >= d.Generation,
					fmt.Sprintf("%d of %d replicas available, generation %d observed %d", d.Status.AvailableReplicas, want, d.Generation, d.Status.ObservedGeneration), nil
			})
	}
	return "", nil
}

// waitService waits until a Service of type LoadBalancer has an external
// address. A Service of another type never gets one: that is the plan's
// mistake, terminal.
func waitService(ctx context.Context, s *job, cs kubernetes.Interface) (events.Report, error) {
	t := s.ev.Step.Target
	timeout, err := s.timeout(defaultWaitTimeout)
	if err != nil {
		return events.Report{}, err
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	api := cs.CoreV1().Services(t.Namespace)
	s.log.InfoContext(ctx, "waiting for the load balancer's external address", "service", t.Namespace+"/"+t.Name)
	var address string
	state, err := waitFor(ctx, t.Name, &corev1.Service{},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return api.List(ctx, o) },
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return api.Watch(ctx, o) },
		func(obj runtime.Object) (bool, string, error) {
			svc := obj.(*corev1.Service)
			if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
				return false, "", failure.Terminal(fmt.Errorf("it is of type %s and never gets an external address; name a LoadBalancer Service in spec.cutover.loadBalancerService", svc.Spec.Type))
			}
			address = kube.ExternalAddress(svc)
			return address != "", "no external address yet", nil
		})
	if err != nil {
		return events.Report{}, fmt.Errorf("wait for Service %s/%s: %w", t.Namespace, t.Name, describeWaitError(parent, err, timeout, state))
	}
	return events.Report{Message: fmt.Sprintf("Service %s/%s has external address %s", t.Namespace, t.Name, address)}, nil
}

// stateNotFound is the state of an object a wait has not seen (yet).
const stateNotFound = "not found"

// waitFor watches one named object until done says so or ctx ends. It lists
// and then watches (re-listing when a watch breaks) so that no change is
// missed and a long wait survives API server restarts. It returns the last
// state done described, for the error of a wait that timed out.
func waitFor(ctx context.Context, name string, obj runtime.Object,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
	done func(runtime.Object) (bool, string, error),
) (string, error) {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return list(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return watchFn(ctx, o)
		},
	}
	state := stateNotFound
	_, err := watchtools.UntilWithSync(ctx, lw, obj, nil, func(ev watch.Event) (bool, error) {
		switch ev.Type {
		case watch.Deleted:
			state = stateNotFound
			return false, nil
		case watch.Added, watch.Modified:
			ok, st, err := done(ev.Object)
			state = st
			return ok, err
		}
		return false, nil
	})
	return state, err
}

// describeWaitError turns a watch that ran out of time into a sentence with
// the last state seen; a timeout is retryable (the next attempt waits
// again), anything else keeps its own type. parent is the step's context:
// when it ended, the step was cancelled (shutdown), not timed out.
func describeWaitError(parent context.Context, err error, timeout time.Duration, state string) error {
	if parent.Err() != nil {
		return fmt.Errorf("interrupted: %w", parent.Err())
	}
	if wait.Interrupted(err) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("not ready after %s (%s)", timeout, state)
	}
	return err
}
