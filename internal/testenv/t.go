package testenv

import "reflect"

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
