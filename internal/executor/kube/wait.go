package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	kubeclient "github.com/ferry-dev/ferry/internal/kube"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	infrav1alpha1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1alpha1"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/controlplane/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
)

// waitable are the kinds a wait step watches.
var waitable = map[string]bool{step.OpenStackCluster: true, step.KubeadmControlPlane: true, step.MachineDeployment: true, step.KamajiControlPlane: true,
	step.OpenStackServer: true}

// waitClauses are the kinds each clause of a wait step's "for" applies to.
// A clause the executor does not know is terminal: a wait that ignored
// part of what the planner asks for would end early. ForNodesReady needs
// no check of its own: CAPI counts a machine ready only when its node is
// Ready, so readyReplicas covers it.
var waitClauses = map[string][]string{
	step.ForReady:       {step.OpenStackCluster, step.KamajiControlPlane},
	step.ForStable:      {step.KubeadmControlPlane, step.MachineDeployment},
	step.ForAvailable:   {step.KubeadmControlPlane, step.MachineDeployment},
	step.ForNoAdopted:   {step.KubeadmControlPlane, step.MachineDeployment},
	step.ForOnOpenStack: {step.KubeadmControlPlane},
	step.ForNodesReady:  {step.MachineDeployment},
	step.ForActive:      {step.OpenStackServer},
}

// waiter is one wait step: the clauses it waits for on its target.
type waiter struct {
	e       *Executor
	s       *job
	clauses []string
	// machines: a clause looks at the cluster's Machines, which are
	// watched too.
	machines bool
}

// wait watches the target until every clause of the "for" parameter
// holds, for at most the "timeout" parameter. Each event only says "look
// again": the state is read afresh, so a missed or merged event costs
// nothing. Timing out is retryable, with what was last seen.
func (e *Executor) wait(ctx context.Context, s *job) (events.Report, error) {
	timeout, err := waitTimeout(s)
	if err != nil {
		return events.Report{}, err
	}
	w := &waiter{e: e, s: s}
	forText := s.params().Get(step.ParamFor)
	if forText == "" {
		forText = step.ForReady
		if s.kind() == step.OpenStackServer {
			forText = step.ForActive
		}
		if s.kind() == step.KubeadmControlPlane || s.kind() == step.MachineDeployment {
			forText = step.ForStable
		}
	}
	for _, clause := range step.Clauses(forText) {
		kinds, known := waitClauses[clause]
		if !known || !slices.Contains(kinds, s.kind()) {
			return events.Report{}, failure.Terminal(fmt.Errorf("wait for %s: ferry cannot wait for %q on a %s", s.target(), clause, s.kind()))
		}
		w.clauses = append(w.clauses, clause)
		w.machines = w.machines || clause == step.ForNoAdopted || clause == step.ForOnOpenStack
	}

	s.log.Info("waiting", "object", s.target(), "for", forText, "timeout", timeout)
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	seen, err := w.until(wctx)
	if seen == "" {
		seen = "nothing, no read completed"
	}
	switch {
	case err == nil:
		return events.Report{Message: fmt.Sprintf("%s: %s (%s)", s.target(), forText, seen)}, nil
	case ctx.Err() != nil:
		return events.Report{}, fmt.Errorf("wait for %s: %s: stopped: %w", s.target(), forText, ctx.Err())
	case wctx.Err() != nil:
		return events.Report{}, fmt.Errorf("wait for %s: %s not reached within %s; last seen: %s", s.target(), forText, timeout, seen)
	}
	return events.Report{}, err
}

// defaultWaitTimeout bounds a wait whose step has no timeout parameter:
// the planner writes the plan's spec.timeouts.wait on every wait, and this
// is that field's default.
var defaultWaitTimeout = func() time.Duration {
	d, err := time.ParseDuration(v1alpha1.DefaultWaitTimeout)
	if err != nil {
		panic(err)
	}
	return d
}()

// waitTimeout reads the timeout parameter, which the planner sets to the
// plan's wait timeout; defaultWaitTimeout without one.
func waitTimeout(s *job) (time.Duration, error) {
	d, err := s.params().Duration(step.ParamTimeout, defaultWaitTimeout)
	if err != nil {
		return 0, fmt.Errorf("wait for %s: %w", s.target(), err)
	}
	return d, nil
}

// rewatchPause keeps a watch that the API server keeps ending at once
// (an overloaded server, a proxy cutting connections) from turning into a
// tight loop: a watch that lived shorter than this is restarted after it.
const rewatchPause = time.Second

// until watches and checks until the clauses hold or ctx ends; it returns
// what it saw last either way. The watches start before the first check,
// so a change between the two is an event, not a miss.
func (w *waiter) until(ctx context.Context) (seen string, err error) {
	s := w.s
	for {
		started := time.Now()
		target, err := w.e.Client.Watch(ctx, listOf(s.kind()), client.InNamespace(s.key.Namespace),
			client.MatchingFields{"metadata.name": s.key.Name})
		if err != nil {
			return seen, fmt.Errorf("wait for %s: watch: %w", s.target(), err)
		}
		var machineEvents <-chan watch.Event
		var machines watch.Interface
		if w.machines {
			machines, err = w.e.Client.Watch(ctx, &clusterv1.MachineList{}, client.InNamespace(s.key.Namespace),
				client.MatchingLabels{clusterv1.ClusterNameLabel: s.cluster()})
			if err != nil {
				target.Stop()
				return seen, fmt.Errorf("wait for %s: watch Machines: %w", s.target(), err)
			}
			machineEvents = machines.ResultChan()
		}
		done, restart := false, false
		for !done && !restart && err == nil {
			var now string
			if done, now, err = w.check(ctx); err != nil {
				break
			}
			seen = now
			if !done {
				restart, err = nextEvent(ctx, target.ResultChan(), machineEvents)
			}
		}
		target.Stop()
		if machines != nil {
			machines.Stop()
		}
		if done || err != nil {
			return seen, err
		}
		if time.Since(started) < rewatchPause {
			select {
			case <-ctx.Done():
				return seen, ctx.Err()
			case <-time.After(rewatchPause):
			}
		}
	}
}

// nextEvent blocks until either watch delivers an event worth a look,
// then takes the events already queued behind it, so that a burst (the
// initial events of a watch, many Machines changing at once) costs one
// look. restart is true when a watch ended or failed and must be started
// again.
func nextEvent(ctx context.Context, a, b <-chan watch.Event) (restart bool, err error) {
	for got := false; ; {
		var ev watch.Event
		var ok bool
		if got {
			select {
			case ev, ok = <-a:
			case ev, ok = <-b:
			default:
				return false, nil
			}
		} else {
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case ev, ok = <-a:
			case ev, ok = <-b:
			}
		}
		switch {
		case !ok || ev.Type == watch.Error:
			return true, nil
		case ev.Type != watch.Bookmark:
			got = true
		}
	}
}

func listOf(kind string) client.ObjectList {
	switch kind {
	case step.OpenStackCluster:
		return &infrav1.OpenStackClusterList{}
	case step.KubeadmControlPlane:
		return &controlplanev1.KubeadmControlPlaneList{}
	case step.MachineDeployment:
		return &clusterv1.MachineDeploymentList{}
	case step.OpenStackServer:
		return &infrav1alpha1.OpenStackServerList{}
	}
	u := &unstructured.UnstructuredList{}
	u.SetGroupVersionKind(kubeclient.KamajiGVK.GroupVersion().WithKind(step.KamajiControlPlane + "List"))
	return u
}

// replicaStatus is a controller's report on its machines.
type replicaStatus struct {
	generation, observedGeneration              int64
	want, replicas, ready, updated, unavailable int32
}

func (r replicaStatus) stable() bool {
	return r.observedGeneration >= r.generation && r.want == r.replicas && r.want == r.ready && r.want == r.updated && r.unavailable == 0
}

func (r replicaStatus) String() string {
	s := fmt.Sprintf("replicas %d (status %d), ready %d, updated %d, unavailable %d", r.want, r.replicas, r.ready, r.updated, r.unavailable)
	if r.observedGeneration < r.generation {
		s += fmt.Sprintf(", generation %d not yet observed (%d)", r.generation, r.observedGeneration)
	}
	return s
}

// check reads the target (and Machines) and reports whether every clause
// holds, and what it saw.
func (w *waiter) check(ctx context.Context) (bool, string, error) {
	s := w.s
	obj := newObject(s.kind())
	err := w.e.Client.Get(ctx, s.key, obj)
	if apierrors.IsNotFound(err) {
		return false, "not found", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("wait for %s: read it: %w", s.target(), err)
	}
	var seen []string
	ready, rs := false, replicaStatus{generation: obj.GetGeneration()}
	switch o := obj.(type) {
	case *infrav1.OpenStackCluster:
		ready = o.Status.Ready
		seen = append(seen, fmt.Sprintf("status.ready %t", ready))
		if o.Status.FailureMessage != nil {
			seen = append(seen, "failureMessage "+*o.Status.FailureMessage)
		}
	case *infrav1alpha1.OpenStackServer:
		ready = o.Status.Ready
		seen = append(seen, serverSeen(o))
	case *unstructured.Unstructured:
		ready, _, _ = unstructured.NestedBool(o.Object, "status", "ready")
		seen = append(seen, fmt.Sprintf("status.ready %t", ready))
	case *controlplanev1.KubeadmControlPlane:
		st := o.Status
		rs.observedGeneration, rs.replicas, rs.ready, rs.updated, rs.unavailable = st.ObservedGeneration, st.Replicas, st.ReadyReplicas, st.UpdatedReplicas, st.UnavailableReplicas
		rs.want = deref32(o.Spec.Replicas)
		seen = append(seen, rs.String())
	case *clusterv1.MachineDeployment:
		st := o.Status
		rs.observedGeneration, rs.replicas, rs.ready, rs.updated, rs.unavailable = st.ObservedGeneration, st.Replicas, st.ReadyReplicas, st.UpdatedReplicas, st.UnavailableReplicas
		rs.want = deref32(o.Spec.Replicas)
		seen = append(seen, rs.String())
	}
	var adopted, offCloud []string
	if w.machines {
		if adopted, offCloud, err = w.machinesLeft(ctx); err != nil {
			return false, "", err
		}
	}
	done := true
	for _, clause := range w.clauses {
		switch clause {
		case step.ForReady, step.ForActive:
			done = done && ready
		case step.ForStable:
			done = done && rs.stable()
		case step.ForAvailable:
			done = done && rs.unavailable == 0
		case step.ForNoAdopted:
			done = done && len(adopted) == 0
			seen = append(seen, fmt.Sprintf("%d adopted machines left %v", len(adopted), adopted))
		case step.ForOnOpenStack:
			done = done && len(offCloud) == 0
			seen = append(seen, fmt.Sprintf("%d control-plane machines not on OpenStack %v", len(offCloud), offCloud))
		}
	}
	return done, strings.Join(seen, "; "), nil
}

// machinesLeft lists the Machines of the target (a KubeadmControlPlane's
// control-plane machines, a MachineDeployment's pool) that ferry adopted,
// and those whose providerID is not OpenStack's. A machine being deleted
// still counts: it is left until it is gone.
func (w *waiter) machinesLeft(ctx context.Context) (adopted, offCloud []string, err error) {
	s := w.s
	var list clusterv1.MachineList
	if err := w.e.Client.List(ctx, &list, client.InNamespace(s.key.Namespace),
		client.MatchingLabels{clusterv1.ClusterNameLabel: s.cluster()}); err != nil {
		return nil, nil, fmt.Errorf("wait for %s: list Machines: %w", s.target(), err)
	}
	for _, m := range list.Items {
		_, cp := m.Labels[clusterv1.MachineControlPlaneLabel]
		if (s.kind() == step.KubeadmControlPlane && !cp) || (s.kind() == step.MachineDeployment && m.Labels[clusterv1.MachineDeploymentNameLabel] != s.key.Name) {
			continue
		}
		if _, ok := m.Annotations[observed.AnnotationAdopted]; ok {
			adopted = append(adopted, m.Name)
		}
		if m.Spec.ProviderID == nil || !strings.HasPrefix(*m.Spec.ProviderID, step.ProviderIDPrefix) {
			offCloud = append(offCloud, m.Name)
		}
	}
	return adopted, offCloud, nil
}

func deref32(p *int32) int32 {
	if p == nil {
		return 1 // CAPI's default for KubeadmControlPlane and MachineDeployment
	}
	return *p
}
