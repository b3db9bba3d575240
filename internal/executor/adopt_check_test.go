//go:build openstack

package executor_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/executor/kube"
	"github.com/ferry-dev/ferry/internal/testenv"
)

// The seed 000 cluster the adoption runs on, as cmd/reconciler's plan test
// has it.
const (
	cluster   = "capi-quickstart"
	namespace = "default"
	version   = "v1.31.4"
)

// newKubeExecutor is the kube executor against the test's management
// cluster, logging to the test's log.
func newKubeExecutor(t *testing.T, k *testenv.Kube) *kube.Executor {
	t.Helper()
	e, err := kube.New(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	e.Logger = slog.New(slog.NewTextHandler(testLog{t}, nil))
	return e
}

// testLog sends the executors' log lines to the test's log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// mustGet reads an object back; the test asserts what is in the API server.
func mustGet(t *testing.T, c client.Client, name string, obj client.Object) {
	t.Helper()
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		t.Fatalf("get %T %s: %v", obj, name, err)
	}
}

// refTo is the reference the adopted objects must hold: always with
// its namespace, which CAPI's controllers look the object up in.
func refTo(apiVersion, kind, name string) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Name: name, Namespace: namespace}
}
