package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/drain"

	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/executor"
	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
)

// defaultDrainTimeout bounds a drain step that carries no timeout. The
// planner gives every drain the plan's spec.cutover.drainTimeout (checked
// when the plan was loaded) as its timeout: the plan is not read here.
var defaultDrainTimeout = mustParseDefault(v1alpha1.DefaultDrainTimeout)

// maxPodsInError caps the pods an error names; the rest are counted.
const maxPodsInError = 10

// drainHelper is kubectl drain as seed 003 runs it: `kubectl drain
// --ignore-daemonsets --delete-local-data`. Pods leave through the eviction
// API, so PodDisruptionBudgets hold; pods with no controller are not
// forced out (nothing would recreate them), and each pod gets its own
// termination grace period.
func drainHelper(ctx context.Context, cs kubernetes.Interface, log *slog.Logger, timeout time.Duration) *drain.Helper {
	return &drain.Helper{
		Ctx:                 ctx,
		Client:              cs,
		IgnoreAllDaemonSets: true,
		DeleteEmptyDirData:  true,
		GracePeriodSeconds:  -1,
		Timeout:             timeout,
		Out:                 drainLog{ctx: ctx, log: log, level: slog.LevelInfo},
		ErrOut:              drainLog{ctx: ctx, log: log, level: slog.LevelWarn},
	}
}

// drainLog turns the drain helper's progress lines into log lines. The
// helper writes from one goroutine per pod; a Write holds one whole line
// and keeps no state, so that is safe.
type drainLog struct {
	ctx   context.Context
	log   *slog.Logger
	level slog.Level
}

func (w drainLog) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimSpace(string(p)), "\n") {
		if line != "" {
			w.log.Log(w.ctx, w.level, "drain: "+line)
		}
	}
	return len(p), nil
}

// getWorkloadNode reads a Node; a Node that is gone is nil, not an error: every
// node action is done once its Node is gone.
func getWorkloadNode(ctx context.Context, cs kubernetes.Interface, name string) (*corev1.Node, error) {
	n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get Node %s: %w", name, err)
	}
	return n, nil
}

// setProviderID gives a Node the provider ID of its server, which is how
// Cluster API's Machine controller finds a Machine's Node (it compares
// spec.providerID, nothing else). A kubelet without a cloud provider leaves
// it empty, and the cloud controller manager fills it only on nodes that
// join after it runs. The field can be set once: a Node that has another
// one is left alone and the step fails for a person to look at.
func setProviderID(ctx context.Context, s *job, cs kubernetes.Interface) (events.Report, error) {
	name, want := s.ev.Step.Target.Name, s.params().Get(step.ParamProviderID)
	if !strings.HasPrefix(want, step.ProviderIDPrefix) {
		return events.Report{}, failure.Terminal(fmt.Errorf("%s Node %s: providerID %q is not %s<server-id>: the node's server was not found", step.SetProviderID, name, want, step.ProviderIDPrefix))
	}
	n, err := getWorkloadNode(ctx, cs, name)
	switch {
	case err != nil:
		return events.Report{}, fmt.Errorf("set-provider-id: %w", err)
	case n == nil:
		return events.Report{}, failure.Terminal(fmt.Errorf("set-provider-id: Node %s is gone", name))
	case n.Spec.ProviderID == want:
		return events.Report{Message: fmt.Sprintf("Node %s already has provider ID %s", name, want)}, nil
	case n.Spec.ProviderID != "":
		return events.Report{}, failure.Terminal(fmt.Errorf("set-provider-id: Node %s has provider ID %s, not %s, and a provider ID cannot change", name, n.Spec.ProviderID, want))
	}
	s.log.InfoContext(ctx, "setting the node's provider ID", "node", name, "providerID", want)
	patch := []byte(`{"spec":{"providerID":` + strconv.Quote(want) + `}}`)
	if _, err := cs.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: executor.FieldManager}); err != nil {
		return events.Report{}, fmt.Errorf("set the provider ID of Node %s: %w", name, err)
	}
	return events.Report{Message: fmt.Sprintf("Node %s has provider ID %s", name, want)}, nil
}

// cordon marks a Node unschedulable.
func cordonNode(ctx context.Context, s *job, cs kubernetes.Interface) (events.Report, error) {
	name := s.ev.Step.Target.Name
	n, err := getWorkloadNode(ctx, cs, name)
	switch {
	case err != nil:
		return events.Report{}, fmt.Errorf("cordon: %w", err)
	case n == nil:
		return events.Report{Message: fmt.Sprintf("Node %s is gone: nothing to cordon", name)}, nil
	case n.Spec.Unschedulable:
		return events.Report{Message: fmt.Sprintf("Node %s already cordoned", name)}, nil
	}
	s.log.InfoContext(ctx, "cordoning node", "node", name)
	if err := setCordon(ctx, cs, name, s.ev.Plan, true); err != nil {
		return events.Report{}, fmt.Errorf("cordon Node %s: %w", name, err)
	}
	return events.Report{Message: fmt.Sprintf("cordoned Node %s", name)}, nil
}

// setCordon cordons a Node and marks the cordon as ferry's
// (observed.AnnotationCordonedBy), or lifts the cordon and the mark, in
// one write.
func setCordon(ctx context.Context, cs kubernetes.Interface, name, plan string, cordon bool) error {
	var mark any = plan
	if !cordon {
		mark = nil
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{observed.AnnotationCordonedBy: mark}},
		"spec":     map[string]any{"unschedulable": cordon},
	})
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: executor.FieldManager})
	return err
}

// machineAnnotations are what Cluster API's Machine controller writes on
// the Node of each Machine it matches (cluster-api v1.9.6,
// internal/controllers/machine/machine_controller_noderef.go).
var machineAnnotations = []string{
	clusterv1.ClusterNameAnnotation, clusterv1.ClusterNamespaceAnnotation, clusterv1.MachineAnnotation,
	clusterv1.OwnerKindAnnotation, clusterv1.OwnerNameAnnotation, clusterv1.LabelsFromMachineAnnotation,
}

// releaseNode takes off a Node the annotations Cluster API's Machine
// controller wrote for a Machine ferry created (a rollback, with the
// Cluster paused, before that Machine goes): they name objects that are
// removed. The planner asks for it only when the Node names such a
// Machine; the step checks that it still does.
func releaseNode(ctx context.Context, s *job, cs kubernetes.Interface) (events.Report, error) {
	name := s.ev.Step.Target.Name
	machine := s.params().Get(step.ParamMachine)
	n, err := getWorkloadNode(ctx, cs, name)
	switch {
	case err != nil:
		return events.Report{}, fmt.Errorf("release: %w", err)
	case n == nil:
		return events.Report{Message: fmt.Sprintf("Node %s is gone", name)}, nil
	case n.Annotations[clusterv1.MachineAnnotation] != machine:
		return events.Report{Message: fmt.Sprintf("Node %s names no Machine %s: left as it is", name, machine)}, nil
	}
	drop := map[string]any{}
	for _, k := range machineAnnotations {
		if _, ok := n.Annotations[k]; ok {
			drop[k] = nil
		}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": drop}})
	if err != nil {
		return events.Report{}, err
	}
	s.log.InfoContext(ctx, "taking Cluster API's annotations off the node", "node", name, "machine", machine)
	if _, err := cs.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: executor.FieldManager}); err != nil {
		return events.Report{}, fmt.Errorf("release Node %s: %w", name, err)
	}
	return events.Report{Message: fmt.Sprintf("took the annotations of Machine %s off Node %s", machine, name)}, nil
}

// uncordonNode lifts a cordon ferry set (a rollback of cutover, or of
// the new nodes' drain); a cordon someone else set stays.
func uncordonNode(ctx context.Context, s *job, cs kubernetes.Interface) (events.Report, error) {
	name := s.ev.Step.Target.Name
	n, err := getWorkloadNode(ctx, cs, name)
	switch {
	case err != nil:
		return events.Report{}, fmt.Errorf("uncordon: %w", err)
	case n == nil:
		return events.Report{Message: fmt.Sprintf("Node %s is gone: nothing to uncordon", name)}, nil
	case n.Annotations[observed.AnnotationCordonedBy] != s.ev.Plan:
		return events.Report{Message: fmt.Sprintf("Node %s was not cordoned by ferry: left as it is", name)}, nil
	}
	s.log.InfoContext(ctx, "uncordoning node", "node", name)
	if err := setCordon(ctx, cs, name, s.ev.Plan, false); err != nil {
		return events.Report{}, fmt.Errorf("uncordon Node %s: %w", name, err)
	}
	return events.Report{Message: fmt.Sprintf("uncordoned Node %s, which ferry had cordoned", name)}, nil
}

// drainNode cordons a Node (a drain of a schedulable node would see its
// pods come back) and evicts every pod a drain evicts, waiting until they
// are gone or the step's timeout ends.
func drainNode(ctx context.Context, s *job, cs kubernetes.Interface) (events.Report, error) {
	name := s.ev.Step.Target.Name
	timeout, err := s.timeout(defaultDrainTimeout)
	if err != nil {
		return events.Report{}, err
	}
	n, err := getWorkloadNode(ctx, cs, name)
	switch {
	case err != nil:
		return events.Report{}, fmt.Errorf("drain: %w", err)
	case n == nil:
		return events.Report{Message: fmt.Sprintf("Node %s is gone: nothing to drain", name)}, nil
	}
	h := drainHelper(ctx, cs, s.log, timeout)
	if !n.Spec.Unschedulable {
		s.log.InfoContext(ctx, "cordoning node before the drain", "node", name)
		if err := setCordon(ctx, cs, name, s.ev.Plan, true); err != nil {
			return events.Report{}, fmt.Errorf("drain Node %s: cordon: %w", name, err)
		}
	}
	list, errs := h.GetPodsForDeletion(name)
	if errs != nil {
		if list == nil || !onlyRefusals(errs) {
			// The pods could not be listed, or a pod's controller could
			// not be read (the API server restarting, say): the next
			// attempt looks again.
			return events.Report{}, fmt.Errorf("drain Node %s: list its pods: %w", name, utilerrors.NewAggregate(errs))
		}
		// Pods the drain refuses to touch (no controller would recreate
		// them): retrying finds them again. A person decides.
		return events.Report{}, failure.Terminal(fmt.Errorf("drain Node %s: %s", name, blockingPods(errs)))
	}
	pods, leaving := splitLeaving(list.Pods())
	if len(pods)+len(leaving) == 0 {
		return events.Report{Message: fmt.Sprintf("Node %s cordoned, no pods to evict", name)}, nil
	}
	s.log.InfoContext(ctx, "draining node", "node", name, "pods", len(pods), "leaving", len(leaving), "timeout", timeout)
	started := time.Now()
	var derr error
	if len(pods) > 0 {
		derr = h.DeleteOrEvictPods(pods)
	}
	if derr == nil && len(leaving) > 0 {
		derr = waitGone(ctx, cs, leaving, timeout-time.Since(started))
	}
	if derr != nil {
		if ctx.Err() != nil {
			return events.Report{}, fmt.Errorf("drain Node %s: interrupted: %w", name, ctx.Err())
		}
		return events.Report{}, drainFailure(ctx, cs, h, name, drainStopped(timeout, time.Since(started)), derr)
	}
	msg := fmt.Sprintf("drained Node %s: evicted %s (%s)", name, countPods(len(pods)), podNames(pods))
	if len(leaving) > 0 {
		msg += fmt.Sprintf("; %s evicted before had left (%s)", countPods(len(leaving)), podNames(leaving))
	}
	return events.Report{Message: msg}, nil
}

// splitLeaving parts the pods to evict from those already leaving: a pod
// with a deletion timestamp was evicted (or deleted) before, typically by
// an earlier attempt whose answer the API server lost while it restarted
// (make chaos LAYOUT=cluster run 9, seed 1795714997845634026). Evicting it
// again would be a second eviction of one pod; it is waited for instead.
func splitLeaving(all []corev1.Pod) (evict, leaving []corev1.Pod) {
	for _, p := range all {
		if p.DeletionTimestamp != nil {
			leaving = append(leaving, p)
		} else {
			evict = append(evict, p)
		}
	}
	return evict, leaving
}

// waitGone waits up to timeout until every pod is gone from the API
// server, or replaced by a pod of the same name and another UID (a
// StatefulSet's). Errors while it looks (an API server restarting) are
// looked past until the timeout.
func waitGone(ctx context.Context, cs kubernetes.Interface, pods []corev1.Pod, timeout time.Duration) error {
	var waiting string
	err := wait.PollUntilContextTimeout(ctx, time.Second, max(timeout, time.Second), true, func(ctx context.Context) (bool, error) {
		for _, p := range pods {
			got, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				waiting = fmt.Sprintf("%s/%s: %v", p.Namespace, p.Name, err)
				return false, nil
			case got.UID != p.UID:
			default:
				waiting = p.Namespace + "/" + p.Name + " still terminating"
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for pods evicted before to leave: %s: %w", waiting, err)
	}
	return nil
}

// refusal is how the drain helper (k8s.io/kubectl/pkg/drain, filters.go)
// names the one kind of pod it refuses with ferry's settings, which
// ignore DaemonSets' pods and delete emptyDir data: a pod that declares
// no controller. Its errors are plain strings.
const refusal = "Pods that declare no controller"

// onlyRefusals reports whether every error of the drain helper's pod
// list is a refusal, which running again cannot cure, rather than a
// request that failed while it looked a pod's controller up (it names the
// DaemonSet it could not read), which it can.
func onlyRefusals(errs []error) bool {
	for _, err := range errs {
		if !strings.Contains(err.Error(), refusal) {
			return false
		}
	}
	return true
}

// blockingPods says which pods a drain will not evict, and why, in the
// drain helper's words minus its kubectl flag hints, which ferry has no
// flags for.
func blockingPods(errs []error) string {
	var parts []string
	for _, err := range errs {
		// "cannot delete cannot delete Pods that declare no controller": the
		// helper's prefix doubles the one of its message.
		msg := strings.Replace(err.Error(), "cannot delete cannot delete", "cannot delete", 1)
		for _, hint := range []string{" (use --force to override)", " (use --ignore-daemonsets to ignore)", " (use --delete-emptydir-data to override)"} {
			msg = strings.ReplaceAll(msg, hint, "")
		}
		parts = append(parts, msg)
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ") + "; delete those pods, or give them a controller, and the drain goes on"
}

// drainStopped says why a drain ended unfinished after took: its
// timeout ran out, or (sooner) the workload API server failed it, for
// example while it restarted. The drain helper's errors do not tell the
// two apart.
func drainStopped(timeout, took time.Duration) string {
	if took >= timeout {
		return fmt.Sprintf("within %s", timeout)
	}
	return fmt.Sprintf("yet: the drain stopped after %s of its %s", took.Round(100*time.Millisecond), timeout)
}

// drainFailure says which pods are left on the node and, for each, the
// PodDisruptionBudget that holds it, if any: the drain helper's own error
// says only that time ran out, or which request failed. stopped is
// drainStopped's reason. It stays retryable: a budget allows evictions
// again once the pods it guards are healthy elsewhere, and an API server
// answers again.
func drainFailure(ctx context.Context, cs kubernetes.Interface, h *drain.Helper, node, stopped string, cause error) error {
	list, errs := h.GetPodsForDeletion(node)
	if errs != nil || list == nil {
		return fmt.Errorf("drain Node %s: pods not evicted %s: %w", node, stopped, cause)
	}
	left := list.Pods()
	if len(left) == 0 {
		// Gone in the meantime: the next attempt finds the node drained.
		return fmt.Errorf("drain Node %s: not finished %s: %w", node, stopped, cause)
	}
	budgets := map[string][]policyv1.PodDisruptionBudget{}
	var parts []string
	for i, p := range left {
		if i == maxPodsInError {
			parts = append(parts, fmt.Sprintf("and %d more", len(left)-maxPodsInError))
			break
		}
		desc := p.Namespace + "/" + p.Name
		if p.DeletionTimestamp != nil {
			desc += " (evicted, still terminating)"
		} else if pdb := guardingBudget(ctx, cs, budgets, &p); pdb != "" {
			desc += " (" + pdb + ")"
		}
		parts = append(parts, desc)
	}
	return fmt.Errorf("drain Node %s: %s not evicted %s: %s; the next attempt goes on from here: %w",
		node, countPods(len(left)), stopped, strings.Join(parts, ", "), cause)
}

// guardingBudget describes the PodDisruptionBudget that selects a pod, or
// returns "" when none does or they cannot be read (the description is a
// help, not a requirement). budgets caches each namespace's list.
func guardingBudget(ctx context.Context, cs kubernetes.Interface, budgets map[string][]policyv1.PodDisruptionBudget, pod *corev1.Pod) string {
	pdbs, ok := budgets[pod.Namespace]
	if !ok {
		l, err := cs.PolicyV1().PodDisruptionBudgets(pod.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return ""
		}
		pdbs = l.Items
		budgets[pod.Namespace] = pdbs
	}
	var names []string
	for i := range pdbs {
		pdb := &pdbs[i]
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		d := "held by PodDisruptionBudget " + pdb.Namespace + "/" + pdb.Name
		switch {
		case pdb.Status.ObservedGeneration < pdb.Generation:
			d += ", which the disruption controller has not processed yet"
		default:
			d += fmt.Sprintf(" allowing %d disruptions: %d healthy pods of %d needed", pdb.Status.DisruptionsAllowed, pdb.Status.CurrentHealthy, pdb.Status.DesiredHealthy)
		}
		names = append(names, d)
	}
	sort.Strings(names)
	return strings.Join(names, "; ")
}

func countPods(n int) string {
	if n == 1 {
		return "1 pod"
	}
	return fmt.Sprintf("%d pods", n)
}

func podNames(pods []corev1.Pod) string {
	var names []string
	for i, p := range pods {
		if i == maxPodsInError {
			names = append(names, fmt.Sprintf("and %d more", len(pods)-maxPodsInError))
			break
		}
		names = append(names, p.Namespace+"/"+p.Name)
	}
	return strings.Join(names, ", ")
}

// deleteNode deletes a Node object whose machine is gone. A Node that is
// still Ready has a kubelet behind it: deleting it would have the pod
// garbage collector delete its pods, and the kubelet register it again.
// That is refused, retryably: once the machine is gone the node stops
// being Ready within the node monitor's grace period.
func deleteNode(ctx context.Context, s *job, cs kubernetes.Interface) (events.Report, error) {
	name := s.ev.Step.Target.Name
	n, err := getWorkloadNode(ctx, cs, name)
	switch {
	case err != nil:
		return events.Report{}, fmt.Errorf("delete: %w", err)
	case n == nil:
		return events.Report{Message: fmt.Sprintf("Node %s already gone", name)}, nil
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return events.Report{}, fmt.Errorf("delete Node %s: it is still Ready, so a kubelet still runs there; ferry deletes only the Node objects of machines that are gone", name)
		}
	}
	s.log.InfoContext(ctx, "deleting node", "node", name)
	err = cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &n.UID}})
	switch {
	case apierrors.IsNotFound(err):
		return events.Report{Message: fmt.Sprintf("Node %s already gone", name)}, nil
	case apierrors.IsConflict(err):
		// A Node of the same name registered since the read: not the one
		// whose machine is gone.
		return events.Report{}, fmt.Errorf("delete Node %s: it was replaced while ferry looked at it: %w", name, err)
	case err != nil:
		return events.Report{}, fmt.Errorf("delete Node %s: %w", name, err)
	}
	return events.Report{Message: fmt.Sprintf("deleted Node %s", name)}, nil
}
