package kube_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/executor/kube"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// The seed 000 cluster of the kube executor's tests, as cmd/reconciler's
// plan test has it.
const (
	cluster   = "capi-quickstart"
	namespace = "default"
	cpNode    = "capi-quickstart-control-plane-7xk2p"
	worker1   = "capi-quickstart-md-0-wq8fz"
	worker2   = "capi-quickstart-md-0-zt5rn"
	version   = "v1.31.4"
)

// newExecutor is the executor under test against a real API server.
func newExecutor(t *testing.T, k *testenv.Kube) *kube.Executor {
	e, err := kube.New(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// planName is the plan of the tests' steps, named after its cluster.
const planName = cluster

// inputs are what the planner gives every step of the seed 000 cluster
// besides its parameters: the cluster and its control plane.
func inputs() *step.Inputs {
	return &step.Inputs{
		Cluster:      v1alpha1.ClusterRef{Namespace: namespace, Name: cluster},
		ControlPlane: step.ObjectRef{Kind: step.KubeadmControlPlane, Name: cluster + "-control-plane"},
	}
}

// event is a hand-made step of the kube executor, for the table tests,
// with the inputs every step of the seed 000 cluster has and no plan.
func event(action step.Action, kind, name string, params map[string]string) *events.StepEvent {
	st := step.Step{
		Key:      step.Key("test", action, step.Target{Kind: kind, Name: name}),
		Phase:    "test",
		Executor: step.Kube,
		Action:   action,
		Target:   step.Target{Kind: kind, Namespace: namespace, Name: name},
		Params:   params,
		Inputs:   inputs(),
	}
	return events.NewStepEvent(planName, "test-revision", st, time.Now())
}

// mustCreate creates objects that a test starts from.
func mustCreate(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		if err := c.Create(context.Background(), obj); err != nil {
			t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
		}
	}
}

// refTo is the reference the objects must hold: always with its
// namespace, which CAPI's controllers look the object up in.
func refTo(apiVersion, kind, name string) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Name: name, Namespace: namespace}
}
