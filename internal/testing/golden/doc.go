// Package golden compares what a test produced with a file kept under the
// test's testdata directory (a golden file), and rewrites those files when
// the tests run with -update. Only tests import it: the flag is the test
// binary's.
//
// It imports only the standard library, and only tests may import it
// (internal/layering's rule "test support stays out of the commands"
// keeps it out of every command).
package golden
