package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEReference: the README's reference shows exactly what `run -h`
// and `executor -h` print, so the documented flags are the real ones.
func TestREADMEReference(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"run", "executor"} {
		var stdout, stderr bytes.Buffer
		run([]string{cmd, "-h"}, &stdout, &stderr)
		_, flags, ok := strings.Cut(stderr.String(), "Flags:\n")
		if !ok {
			t.Fatalf("%s -h printed no flags:\n%s", cmd, stderr.String())
		}
		section := regexp.MustCompile("(?s)### `reconciler " + cmd + "`\n\n```text\nFlags:\n(.*?)```").FindSubmatch(readme)
		if section == nil {
			t.Fatalf("README has no reference section for reconciler %s", cmd)
		}
		if got := string(section[1]); got != flags {
			t.Errorf("README's flags of reconciler %s differ from `reconciler %s -h`; paste its output:\n%s", cmd, cmd, flags)
		}
	}
}
