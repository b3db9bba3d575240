package secretfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/redact"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if s, err := Read(write("token", "  ghp_abc\n")); err != nil || s != "ghp_abc" {
		t.Errorf("Read = %q, %v; want the trimmed token", s, err)
	}
	empty := write("empty", " \n")
	if _, err := Read(empty); err == nil || !strings.Contains(err.Error(), empty) {
		t.Errorf("Read of a blank file: %v; want an error naming it", err)
	}
	if _, err := Read(filepath.Join(dir, "missing")); err == nil {
		t.Error("Read of a missing file: no error")
	}
}

// TestReadRegisters: what Read returns is masked by redact.Scrub from then
// on, wherever it appears.
func TestReadRegisters(t *testing.T) {
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte("ghp_secretfile-test-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(p); err != nil {
		t.Fatal(err)
	}
	if got := redact.Scrub("Bad credentials: ghp_secretfile-test-token"); got != "Bad credentials: "+redact.Mask {
		t.Errorf("Scrub = %q; want the token masked", got)
	}
}
