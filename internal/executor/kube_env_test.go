package executor_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/executor"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testenv"
)

// The seed 000 cluster of the kube executor's tests, as cmd/reconciler's
// plan test has it.
const (
	kubeCluster   = "capi-quickstart"
	kubeNamespace = "default"
	kubeCPNode    = "capi-quickstart-control-plane-7xk2p"
	kubeWorker1   = "capi-quickstart-md-0-wq8fz"
	kubeWorker2   = "capi-quickstart-md-0-zt5rn"
	kubeVersion   = "v1.31.4"
)

// kubePlan loads plans/capi-quickstart.yaml, approved up to approve, with
// its defaults applied, as the reconciler hands it to executors.
func kubePlan(t *testing.T, approve string) *v1alpha1.MigrationPlan {
	t.Helper()
	return testenv.ExamplePlanDecoded(t, approve)
}

// kubeExecutor is the executor under test against a real API server.
func kubeExecutor(t *testing.T, k *testenv.Kube) *executor.KubeExecutor {
	t.Helper()
	e, err := executor.NewKubeExecutor(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	e.Logger = slog.New(slog.NewTextHandler(kubeTestLog{t}, nil))
	return e
}

// kubeTestLog sends the executor's log lines to the test's log.
type kubeTestLog struct{ t *testing.T }

func (w kubeTestLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// kubeEvent is a hand-made step of the kube executor, for the table tests.
func kubeEvent(p *v1alpha1.MigrationPlan, action step.Action, kind, name string, params map[string]string) *events.StepEvent {
	st := step.Step{
		Key:      "test/" + string(action) + "/" + strings.ToLower(kind) + "/" + name,
		Phase:    "test",
		Executor: step.Kube,
		Action:   action,
		Target:   step.Target{Kind: kind, Namespace: p.Spec.Cluster.Namespace, Name: name},
		Params:   params,
	}
	return events.NewStepEvent(p, "test-revision", st, time.Now())
}

// kubeMustCreate creates objects that a test starts from.
func kubeMustCreate(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		if err := c.Create(context.Background(), obj); err != nil {
			t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
		}
	}
}

// kubeMustGet reads an object back; the tests assert what is in the API server.
func kubeMustGet(t *testing.T, c client.Client, name string, obj client.Object) {
	t.Helper()
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: kubeNamespace, Name: name}, obj); err != nil {
		t.Fatalf("get %T %s: %v", obj, name, err)
	}
}
