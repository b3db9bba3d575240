package testenv_test

import (
	"os"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestProgram: Fatal ends Do with its message, cleanups run newest first at
// Close, and temporary directories go.
func TestProgram(t *testing.T) {
	var logged, order []string
	p := testenv.NewProgram(func(format string, _ ...any) { logged = append(logged, format) })
	var dir string
	err := p.Do(func() error {
		dir = p.TempDir()
		p.Cleanup(func() { order = append(order, "first") })
		p.Cleanup(func() { order = append(order, "second") })
		p.Logf("hello")
		p.Fatalf("stopped at %d", 3)
		order = append(order, "not reached")
		return nil
	})
	if err == nil || err.Error() != "stopped at 3" {
		t.Fatalf("Do = %v; want the Fatalf message", err)
	}
	p.Close()
	if strings.Join(order, ",") != "second,first" || len(logged) != 1 {
		t.Errorf("order %v, logged %v", order, logged)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("temporary directory %s left: %v", dir, err)
	}
}
