//go:build openstack

package executor_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

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
	e.Logger = testenv.Logger(t)
	return e
}

// refTo is the reference the adopted objects must hold: always with
// its namespace, which CAPI's controllers look the object up in.
func refTo(apiVersion, kind, name string) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Name: name, Namespace: namespace}
}
