package workload

import (
	"context"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// testRevision is the plans repository revision every test step runs at.
const testRevision = "8f3c2a91d0e4b5c6a7f8091a2b3c4d5e6f708192"

// testEnv is a management cluster, a workload cluster reached through
// the management cluster's <cluster>-kubeconfig Secret, and the kubelet
// stand-in that finishes pod terminations there.
type testEnv struct {
	mgmt, wl *testenv.Kube
	kubelet  *testenv.Kubelet
	exec     *Executor
}

// Worker nodes of the test's workload cluster, one per test that changes
// a node, so that subtests run in parallel without meeting.
var testNodes = []string{
	"wl-cordon", "wl-delete", "wl-drain", "wl-drain-bare",
}

// TestWorkload runs every workload action against two real API servers:
// the two take seconds to start, so the actions share them, each on its
// own nodes, namespaces or objects.
func TestWorkload(t *testing.T) {
	mgmt := testenv.StartKube(t)
	wl := testenv.StartKube(t)
	testenv.Orphan(t, mgmt, wl, testenv.OrphanedCluster{
		Name: "c1", Namespace: "default",
		ControlPlaneNodes: []string{"wl-cp-0"},
		WorkerNodes:       testNodes,
		KubeletVersion:    "v1.31.4",
	})
	env := &testEnv{
		mgmt:    mgmt,
		wl:      wl,
		kubelet: testenv.StartKubelet(t, wl),
		exec: &Executor{
			Client: mgmt.Client,
			Repo: func(context.Context, string) (fs.FS, error) {
				return os.DirFS("testdata/workload"), nil
			},
		},
	}
	t.Run("Kind", func(t *testing.T) {
		if got := env.exec.Kind(); got != step.Workload {
			t.Errorf("Kind() = %q, want %q", got, step.Workload)
		}
	})
	t.Run("Kubeconfig", func(t *testing.T) { testWorkloadKubeconfig(t, env) })
	t.Run("Cordon", func(t *testing.T) { t.Parallel(); testWorkloadCordon(t, env) })
	t.Run("Delete", func(t *testing.T) { t.Parallel(); testWorkloadDelete(t, env) })
	t.Run("Drain", func(t *testing.T) { t.Parallel(); testWorkloadDrain(t, env) })
	t.Run("Apply", func(t *testing.T) { t.Parallel(); testWorkloadApply(t, env) })
	t.Run("WaitManifest", func(t *testing.T) { t.Parallel(); testWorkloadWaitManifest(t, env) })
	t.Run("WaitService", func(t *testing.T) { t.Parallel(); testWorkloadWaitService(t, env) })
	t.Run("DeleteManifest", func(t *testing.T) { t.Parallel(); testWorkloadDeleteManifest(t, env) })
}

// testPlan is a defaulted plan of strategy replace for cluster c1.
func testPlan(mutate func(*v1alpha1.MigrationPlan)) *v1alpha1.MigrationPlan {
	p := &v1alpha1.MigrationPlan{
		APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind,
		Metadata: v1alpha1.Metadata{Name: "c1"},
		Spec: v1alpha1.Spec{
			Cluster:  v1alpha1.ClusterRef{Name: "c1"},
			Strategy: v1alpha1.StrategyReplace,
			Replace:  &v1alpha1.ReplaceOptions{OldMachineDeployments: []string{"c1-md-0"}},
			Target: v1alpha1.Target{
				Network:      v1alpha1.ResourceRef{Name: "k8s-net"},
				SSHKey:       v1alpha1.SSHKey{Name: "capi-key"},
				ControlPlane: v1alpha1.ControlPlane{Provider: v1alpha1.ProviderKubeadm},
			},
		},
	}
	if mutate != nil {
		mutate(p)
	}
	v1alpha1.Default(p)
	return p
}

// inputs are what the planner gives every step of cluster c1 besides
// its parameters: the cluster and its control plane.
func inputs() step.Inputs {
	return step.Inputs{
		Cluster:      v1alpha1.ClusterRef{Namespace: "default", Name: "c1"},
		ControlPlane: step.ObjectRef{Kind: step.KubeadmControlPlane, Name: "c1-control-plane"},
	}
}

// stepEvent builds the event of a workload step of plan c1 as the
// reconciler publishes it: the step and its inputs, no plan.
func stepEvent(action step.Action, target step.Target, params map[string]string) *events.StepEvent {
	return planStep("c1", inputs(), action, target, params)
}

// planStep is stepEvent for another plan, or other inputs.
func planStep(plan string, in step.Inputs, action step.Action, target step.Target, params map[string]string) *events.StepEvent {
	s := step.Step{
		Key:      step.Key(v1alpha1.PhaseCutover, action, target),
		Phase:    v1alpha1.PhaseCutover,
		Executor: step.Workload,
		Action:   action,
		Target:   target,
		Params:   params,
		Inputs:   &in,
	}
	return events.NewStepEvent(plan, testRevision, s, time.Now())
}

// node reads a workload Node; nil when it is gone.
func (env *testEnv) node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	var n corev1.Node
	err := env.wl.Client.Get(context.Background(), client.ObjectKey{Name: name}, &n)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get Node %s: %v", name, err)
	}
	return &n
}

// checkWorkloadErr compares an error with what a case wants: nil, or one that
// holds every wanted substring and is terminal or not.
func checkWorkloadErr(t *testing.T, err error, want []string, terminal bool) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error, want one with %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if got := failure.IsTerminal(err); got != terminal {
		t.Errorf("terminal = %t, want %t: %v", got, terminal, err)
	}
}

// testWorkloadKubeconfig: the workload cluster is reached only through the
// kubeconfig Secret, and what goes wrong with it never shows its content.
func testWorkloadKubeconfig(t *testing.T, env *testEnv) {
	ctx := context.Background()
	const garbage = "workload-test-kubeconfig-secret-value"
	for _, obj := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "broken-kubeconfig"},
			Data: map[string][]byte{"value": []byte(garbage)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "nokey-kubeconfig"},
			Data: map[string][]byte{"other": []byte(garbage)}},
	} {
		if err := env.mgmt.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name, cluster string
		want          []string
		terminal      bool
	}{
		{"secret missing", "absent", []string{"Secret default/absent-kubeconfig not found"}, false},
		{"key missing", "nokey", []string{"Secret default/nokey-kubeconfig has no key value"}, false},
		{"not a kubeconfig", "broken", []string{"kubeconfig in Secret default/broken-kubeconfig is not usable"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := inputs()
			in.Cluster.Name = tc.cluster
			_, err := env.exec.Execute(ctx, planStep("c1", in, step.Cordon, step.Target{Kind: step.Node, Name: "wl-cordon"}, nil))
			checkWorkloadErr(t, err, tc.want, tc.terminal)
			if err != nil && strings.Contains(err.Error(), garbage) {
				t.Errorf("error shows the kubeconfig: %v", err)
			}
		})
	}
}

// testWorkloadCordon: cordon twice leaves the node unschedulable, once.
func testWorkloadCordon(t *testing.T, env *testEnv) {
	ctx := context.Background()
	cases := []struct {
		name, node, report string
	}{
		{"first", "wl-cordon", "cordoned Node wl-cordon"},
		{"again", "wl-cordon", "Node wl-cordon already cordoned"},
		{"node gone", "wl-never-existed", "Node wl-never-existed is gone: nothing to cordon"},
	}
	for _, tc := range cases {
		rep, err := env.exec.Execute(ctx, stepEvent(step.Cordon, step.Target{Kind: step.Node, Name: tc.node}, nil))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if rep.Message != tc.report {
			t.Errorf("%s: report %q, want %q", tc.name, rep.Message, tc.report)
		}
	}
	if n := env.node(t, "wl-cordon"); n == nil || !n.Spec.Unschedulable || n.Annotations[observed.AnnotationCordonedBy] != "c1" {
		t.Errorf("Node wl-cordon not cordoned by ferry: %+v", n)
	}
	// A rollback uncordons what ferry cordoned, and only that.
	uncordon := func(plan string) string {
		rep, err := env.exec.Execute(ctx, planStep(plan, inputs(), step.Uncordon, step.Target{Kind: step.Node, Name: "wl-cordon"}, nil))
		if err != nil {
			t.Fatalf("uncordon for plan %s: %v", plan, err)
		}
		return rep.Message
	}
	if msg := uncordon("another-plan"); !strings.Contains(msg, "not cordoned by ferry") || !env.node(t, "wl-cordon").Spec.Unschedulable {
		t.Errorf("uncordon by another plan: %q; want the cordon left", msg)
	}
	if msg := uncordon("c1"); msg != "uncordoned Node wl-cordon, which ferry had cordoned" {
		t.Errorf("uncordon: %q", msg)
	}
	if n := env.node(t, "wl-cordon"); n.Spec.Unschedulable || n.Annotations[observed.AnnotationCordonedBy] != "" {
		t.Errorf("Node wl-cordon after uncordon: unschedulable %t, annotations %v", n.Spec.Unschedulable, n.Annotations)
	}

	// A rollback takes off the annotations Cluster API wrote for a
	// Machine ferry created, and no other annotation.
	n := env.node(t, "wl-cordon")
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations["cluster.x-k8s.io/machine"], n.Annotations["cluster.x-k8s.io/owner-kind"], n.Annotations["team"] = "m-1", "MachineSet", "a"
	if err := env.wl.Client.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	release := func(machine string) string {
		rep, err := env.exec.Execute(ctx, stepEvent(step.Release, step.Target{Kind: step.Node, Name: "wl-cordon"}, map[string]string{step.ParamMachine: machine}))
		if err != nil {
			t.Fatalf("release (machine %s): %v", machine, err)
		}
		return rep.Message
	}
	if msg := release("m-2"); !strings.Contains(msg, "names no Machine m-2") || env.node(t, "wl-cordon").Annotations["cluster.x-k8s.io/machine"] != "m-1" {
		t.Errorf("release for another Machine: %q; want the annotations left", msg)
	}
	release("m-1")
	if a := env.node(t, "wl-cordon").Annotations; a["cluster.x-k8s.io/machine"] != "" || a["cluster.x-k8s.io/owner-kind"] != "" || a["team"] != "a" {
		t.Errorf("annotations after release: %v; want Cluster API's gone and the others kept", a)
	}
}

// testWorkloadDelete: a Ready node is kept (its kubelet runs); once it is
// NotReady, delete removes it, and deleting it again succeeds.
func testWorkloadDelete(t *testing.T, env *testEnv) {
	ctx := context.Background()
	step := stepEvent(step.Delete, step.Target{Kind: step.Node, Name: "wl-delete"}, nil)

	_, err := env.exec.Execute(ctx, step)
	checkWorkloadErr(t, err, []string{"delete Node wl-delete", "still Ready"}, false)
	if env.node(t, "wl-delete") == nil {
		t.Fatal("a Ready node was deleted")
	}

	// Its machine is gone: the node controller (not running here) would
	// mark the node's Ready condition Unknown.
	n := env.node(t, "wl-delete")
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			n.Status.Conditions[i].Status = corev1.ConditionUnknown
			n.Status.Conditions[i].Reason = "NodeStatusUnknown"
		}
	}
	if err := env.wl.Client.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"deleted Node wl-delete", "Node wl-delete already gone"} {
		rep, err := env.exec.Execute(ctx, step)
		if err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
		if rep.Message != want {
			t.Errorf("run %d: report %q, want %q", i+1, rep.Message, want)
		}
		if env.node(t, "wl-delete") != nil {
			t.Errorf("run %d: Node wl-delete still exists", i+1)
		}
	}
}
