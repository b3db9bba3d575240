package main

import (
	"bytes"
	"flag"
	"os"
	"regexp"
	"testing"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/commands.md from the commands' --help")

// TestCommandsReference: docs/commands.md shows exactly what each
// command's --help prints, so the documented flags are the real ones.
// `go test ./cmd/reconciler -run CommandsReference -update-docs` rewrites it.
func TestCommandsReference(t *testing.T) {
	const path = "../../docs/commands.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range commandNames {
		var stdout, stderr bytes.Buffer
		if code := run([]string{cmd, "--help"}, &stdout, &stderr); code != 0 {
			t.Fatalf("%s --help exited %d: %s", cmd, code, stderr.String())
		}
		block := regexp.MustCompile("(?s)(## `reconciler " + cmd + "`\n\n```text\n)(.*?)(```)")
		section := block.FindSubmatch(doc)
		switch {
		case section == nil:
			t.Errorf("docs/commands.md has no section for reconciler %s", cmd)
		case *updateDocs:
			doc = block.ReplaceAllFunc(doc, func([]byte) []byte {
				return append(append(append([]byte{}, section[1]...), stdout.Bytes()...), section[3]...)
			})
		case string(section[2]) != stdout.String():
			t.Errorf("docs/commands.md on reconciler %s differs from `reconciler %s --help` (-update-docs rewrites it):\n%s", cmd, cmd, stdout.String())
		}
	}
	if *updateDocs {
		if err := os.WriteFile(path, doc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
