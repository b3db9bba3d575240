package testenv

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestRunPods: on an API server with RunPods' nodes, a three-replica
// Deployment's pods are scheduled and Running; the disruption controller
// computes a PodDisruptionBudget of maxUnavailable 1 over them. With every
// node cordoned, as a drain leaves them, the API server lets one eviction
// through and refuses a second (429): the replacement cannot be scheduled,
// so the budget stays spent. Once a node is schedulable again the
// ReplicaSet's replacement runs there.
func TestRunPods(t *testing.T) {
	k := StartKube(t)
	k.RunPods(t, "node-a", "node-b", "node-c")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	labels := map[string]string{"app": "web"}
	objs := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}}}},
		}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: labels},
		}},
	}
	for _, o := range objs {
		if err := k.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	pods := waitRunning(ctx, t, k, labels, 3)
	var pdb policyv1.PodDisruptionBudget
	waitFor(ctx, t, "the budget allows one disruption of 3 healthy pods", func() bool {
		MustGet(t, k.Client, "default", "web", &pdb)
		return pdb.Status.CurrentHealthy == 3 && pdb.Status.DisruptionsAllowed == 1
	})

	for _, n := range []string{"node-a", "node-b", "node-c"} {
		setUnschedulable(ctx, t, k, n, true)
	}
	evict := func(p corev1.Pod) error {
		return k.Client.SubResource("eviction").Create(ctx, &p, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}})
	}
	if err := evict(pods[0]); err != nil {
		t.Fatalf("first eviction: %v", err)
	}
	if err := evict(pods[1]); !apierrors.IsTooManyRequests(err) {
		t.Errorf("second eviction while the budget is spent: %v; want 429 Too Many Requests", err)
	}
	setUnschedulable(ctx, t, k, "node-a", false)
	after := waitRunning(ctx, t, k, labels, 3)
	for _, p := range after {
		if p.Name == pods[0].Name {
			t.Errorf("evicted pod %s is still Running", p.Name)
		}
	}
}

// setUnschedulable cordons or uncordons a node.
func setUnschedulable(ctx context.Context, t *testing.T, k *Kube, name string, cordon bool) {
	t.Helper()
	var n corev1.Node
	MustGet(t, k.Client, "", name, &n)
	patch := client.MergeFrom(n.DeepCopy())
	n.Spec.Unschedulable = cordon
	if err := k.Client.Patch(ctx, &n, patch); err != nil {
		t.Fatal(err)
	}
}

// waitRunning waits until n pods with labels are Running and Ready on a
// node, and returns them.
func waitRunning(ctx context.Context, t *testing.T, k *Kube, labels map[string]string, n int) []corev1.Pod {
	t.Helper()
	var running []corev1.Pod
	waitFor(ctx, t, "pods Running and Ready", func() bool {
		var list corev1.PodList
		if err := k.Client.List(ctx, &list, client.InNamespace("default"), client.MatchingLabels(labels)); err != nil {
			return false
		}
		running = running[:0]
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" && Serving(&p) {
				running = append(running, p)
			}
		}
		return len(running) == n
	})
	return running
}

// waitFor polls cond until it holds, failing the test at ctx's end.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
