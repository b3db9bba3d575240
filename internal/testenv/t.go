package testenv

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
