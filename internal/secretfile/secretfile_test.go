package secretfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
