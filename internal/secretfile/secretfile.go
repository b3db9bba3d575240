package secretfile

import (
	"fmt"
	"os"
	"strings"

	"github.com/ferry-dev/ferry/internal/redact"
)

// Read returns the file's content with surrounding white space trimmed (a
// trailing newline is the usual case). An empty file is an error, since an
// empty secret is never what was meant. Errors name the file, never the
// content. The content is registered with internal/redact, so that no
// log line, status or comment shows it even where a server echoes it.
func Read(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	redact.Register(s)
	return s, nil
}
