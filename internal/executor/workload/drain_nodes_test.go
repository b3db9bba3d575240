package workload

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestDrainRunningNodes drains a node of a workload cluster whose pods run
// (testenv.RunPods: the real scheduler and controller manager, and hollow
// kubelets), not a stand-in: all three replicas of a Deployment under a
// PodDisruptionBudget of maxUnavailable 1, which the disruption controller
// computes, start on the node, next to a DaemonSet's pod. The drain evicts
// them (and what else runs there but DaemonSet pods) one at a time
// through the eviction API, each once the
// ReplicaSet's replacement is Ready on another node: fewer than two Ready
// replicas are never seen. One of the three is already terminating when
// the drain starts: it is waited for, not evicted again. The DaemonSet's
// pod stays; a second run has nothing to evict. Then a budget of no disruption holds a pod on another
// node: that drain fails at its timeout naming the budget, and leaves the
// node cordoned and the pod running.
func TestDrainRunningNodes(t *testing.T) {
	mgmt, wl := testenv.StartKube(t), testenv.StartKube(t)
	wl.RunPods(t, "run-0", "run-1", "run-2")
	testenv.Orphan(t, mgmt, wl, testenv.OrphanedCluster{Name: "c1", Namespace: "default", KubeletVersion: "v1.31.4"})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	exec := &Executor{Client: mgmt.Client}
	labels := map[string]string{"app": "web"}

	// Every replica starts on run-0: the others are cordoned until then.
	cordon(ctx, t, wl, "run-1", true)
	cordon(ctx, t, wl, "run-2", true)
	createAll(ctx, t, wl, runningApps(labels)...)
	before := readyPods(ctx, t, wl, labels)
	for len(before) != 3 || slices.ContainsFunc(before, func(p corev1.Pod) bool { return p.Spec.NodeName != "run-0" }) {
		sleepOrFail(ctx, t, "three web replicas Ready on run-0")
		before = readyPods(ctx, t, wl, labels)
	}
	var pdb policyv1.PodDisruptionBudget
	for pdb.Status.DisruptionsAllowed != 1 {
		sleepOrFail(ctx, t, "the disruption controller allowing one disruption")
		testenv.MustGet(t, wl.Client, "default", "web", &pdb)
	}
	cordon(ctx, t, wl, "run-1", false)
	cordon(ctx, t, wl, "run-2", false)

	// One replica is already leaving when the drain starts, as after an
	// attempt whose eviction went through while the API server's answer
	// was lost: a finalizer of the test's holds it terminating. The drain
	// waits for it and does not evict it a second time.
	held := before[0]
	holdPod(ctx, t, wl, &held, true)
	if err := wl.Client.Delete(ctx, &held); err != nil {
		t.Fatal(err)
	}
	for pdb.Status.DisruptionsAllowed != 1 || pdb.Status.CurrentHealthy != 3 {
		sleepOrFail(ctx, t, "the held replica's replacement serving")
		testenv.MustGet(t, wl.Client, "default", "web", &pdb)
	}

	least := wl.WatchLeastHealthy(ctx, "default", labels)
	ev := stepEvent(step.Drain, step.Target{Kind: step.Node, Name: "run-0"},
		map[string]string{"timeout": "2m", "respect": "PodDisruptionBudgets", "ignore": "DaemonSets"})
	type answer struct {
		msg string
		err error
	}
	first := make(chan answer, 1)
	go func() {
		rep, err := exec.Execute(ctx, ev)
		first <- answer{rep.Message, err}
	}()
	for _, p := range before[1:] {
		for !wl.Evicted(t, &p) {
			sleepOrFail(ctx, t, "the drain evicting "+p.Name)
		}
	}
	select {
	case a := <-first:
		t.Fatalf("the drain ended while a pod it found terminating was still there: %q, %v", a.msg, a.err)
	case <-time.After(2 * time.Second):
	}
	holdPod(ctx, t, wl, &held, false)
	a := <-first
	wantHeld := "; 1 pod evicted before had left (default/" + held.Name + ")"
	evictedWeb := strings.Contains(a.msg, before[1].Name) && strings.Contains(a.msg, before[2].Name)
	if a.err != nil || !strings.HasPrefix(a.msg, "drained Node run-0: evicted ") || !evictedWeb || !strings.HasSuffix(a.msg, wantHeld) {
		t.Fatalf("run 1: report %q, error %v; want the other two web pods evicted and …%q", a.msg, a.err, wantHeld)
	}
	if rep, err := exec.Execute(ctx, ev); err != nil || rep.Message != "Node run-0 cordoned, no pods to evict" {
		t.Fatalf("run 2: report %q, error %v; want nothing to evict", rep.Message, err)
	}
	if wl.Evicted(t, &held) {
		t.Errorf("pod %s was evicted although it was already terminating", held.Name)
	}
	if n := least(); n < 2 {
		t.Errorf("%d web replicas healthy at the worst of the drain; the budget allows one disruption of three", n)
	}
	after := readyPods(ctx, t, wl, labels)
	for len(after) != 3 {
		sleepOrFail(ctx, t, "three web replicas Ready after the drain")
		after = readyPods(ctx, t, wl, labels)
	}
	for _, p := range after {
		if p.Spec.NodeName == "run-0" {
			t.Errorf("web pod %s runs on the drained node", p.Name)
		}
	}
	for _, p := range before[1:] {
		if !wl.Evicted(t, &p) {
			t.Errorf("pod %s left run-0 without an eviction through the eviction API", p.Name)
		}
	}
	var agents corev1.PodList
	if err := wl.Client.List(ctx, &agents, client.InNamespace("default"), client.MatchingLabels{"app": "agent"}, client.MatchingFields{"spec.nodeName": "run-0"}); err != nil || len(agents.Items) != 1 {
		t.Errorf("DaemonSet pods on run-0: %d, %v; want its one pod kept", len(agents.Items), err)
	}
	heldDrain(ctx, t, wl, exec)
}

// heldDrain drains run-1 under a budget that allows no disruption of its
// one db pod: the drain fails at its timeout naming the budget; the node
// stays cordoned and the pod serves.
func heldDrain(ctx context.Context, t *testing.T, wl *testenv.Kube, exec *Executor) {
	t.Helper()
	db := map[string]string{"app": "db"}
	cordon(ctx, t, wl, "run-2", true) // run-0 is cordoned by the drain: db lands on run-1
	objs := runningApps(db)[:2]
	for _, o := range objs {
		o.SetName("db")
	}
	objs[0].(*appsv1.Deployment).Spec.Replicas = ptr.To[int32](1)
	objs[1].(*policyv1.PodDisruptionBudget).Spec.MaxUnavailable = ptr.To(intstr.FromInt32(0))
	createAll(ctx, t, wl, objs...)
	for pods := readyPods(ctx, t, wl, db); len(pods) != 1; pods = readyPods(ctx, t, wl, db) {
		sleepOrFail(ctx, t, "the db pod serving")
	}
	var pdb policyv1.PodDisruptionBudget
	for pdb.Status.CurrentHealthy != 1 {
		sleepOrFail(ctx, t, "the disruption controller counting the db pod")
		testenv.MustGet(t, wl.Client, "default", "db", &pdb)
	}
	ev := stepEvent(step.Drain, step.Target{Kind: step.Node, Name: "run-1"},
		map[string]string{"timeout": "3s", "respect": "PodDisruptionBudgets", "ignore": "DaemonSets"})
	_, err := exec.Execute(ctx, ev)
	checkWorkloadErr(t, err, []string{"drain Node run-1", "not evicted within 3s", "held by PodDisruptionBudget default/db allowing 0 disruptions"}, false)
	var n corev1.Node
	if testenv.MustGet(t, wl.Client, "", "run-1", &n); !n.Spec.Unschedulable {
		t.Error("run-1 is not cordoned after the held drain")
	}
	if pods := readyPods(ctx, t, wl, db); len(pods) != 1 || pods[0].Spec.NodeName != "run-1" {
		t.Errorf("db pods serving after the held drain: %d; want its one pod, on run-1", len(pods))
	}
}

// runningApps are the test's web Deployment, its budget and a DaemonSet.
func runningApps(labels map[string]string) []client.Object {
	pod := func(l map[string]string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
	}
	agent := map[string]string{"app": "agent"}
	return []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: pod(labels)}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "agent"}, Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: agent}, Template: pod(agent)}},
	}
}

// holdPod puts the test's finalizer on a pod, or takes it off.
func holdPod(ctx context.Context, t *testing.T, k *testenv.Kube, p *corev1.Pod, on bool) {
	t.Helper()
	const finalizer = "test.ferry.dev/hold"
	var cur corev1.Pod
	testenv.MustGet(t, k.Client, p.Namespace, p.Name, &cur)
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Finalizers = slices.DeleteFunc(cur.Finalizers, func(f string) bool { return f == finalizer })
	if on {
		cur.Finalizers = append(cur.Finalizers, finalizer)
	}
	if err := k.Client.Patch(ctx, &cur, patch); err != nil {
		t.Fatal(err)
	}
}

func createAll(ctx context.Context, t *testing.T, k *testenv.Kube, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := k.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

func cordon(ctx context.Context, t *testing.T, k *testenv.Kube, name string, on bool) {
	t.Helper()
	var n corev1.Node
	testenv.MustGet(t, k.Client, "", name, &n)
	patch := client.MergeFrom(n.DeepCopy())
	n.Spec.Unschedulable = on
	if err := k.Client.Patch(ctx, &n, patch); err != nil {
		t.Fatal(err)
	}
}

func sleepOrFail(ctx context.Context, t *testing.T, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
		t.Fatalf("waiting for %s: %v", what, ctx.Err())
	case <-time.After(200 * time.Millisecond):
	}
}

// readyPods lists the pods with labels that serve.
func readyPods(ctx context.Context, t *testing.T, k *testenv.Kube, labels map[string]string) []corev1.Pod {
	t.Helper()
	pods, err := k.Pods(ctx, "default", labels, testenv.Serving)
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

// TestDrainStopped: a drain that used its whole timeout says so; one the
// API server failed sooner (make chaos restarts it mid-drain) says how
// long it ran instead of blaming the timeout.
func TestDrainStopped(t *testing.T) {
	for _, c := range []struct {
		took time.Duration
		want string
	}{
		{time.Minute, "within 1m0s"},
		{61 * time.Second, "within 1m0s"},
		{4153 * time.Millisecond, "yet: the drain stopped after 4.2s of its 1m0s"},
	} {
		if got := drainStopped(time.Minute, c.took); got != c.want {
			t.Errorf("drainStopped(1m, %s) = %q, want %q", c.took, got, c.want)
		}
	}
}
