package testenv

import (
	"context"
	"log/slog"
	"reflect"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// T is what the test environment asks of its caller: *testing.T and
// *testing.B satisfy it, and so does the demo's runner (hack/demo), which
// runs the same backends outside a test. Cleanup functions run in reverse
// order when the caller ends; Fatal and Fatalf stop it.
type T interface {
	Helper()
	Cleanup(func())
	TempDir() string
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// Expect compares one field of an end state: the executors' tests assert
// what is in the API server, field by field, and go on after a mismatch
// so that one run names every field that is wrong.
func Expect(t T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %v; want %v", what, got, want)
	}
}

// Logger is a text logger whose lines go to the test's log, so that what
// the code under test logged shows next to the failure it explains.
func Logger(t T) *slog.Logger {
	return slog.New(slog.NewTextHandler(logWriter{t}, nil))
}

type logWriter struct{ t T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// MustGet reads an object back, stopping the test when it cannot: tests
// assert what is in the API server, not what the code meant to write.
func MustGet(t T, c client.Reader, namespace, name string, obj client.Object) {
	t.Helper()
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		t.Fatalf("get %T %s: %v", obj, name, err)
	}
}
