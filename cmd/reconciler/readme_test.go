package main

import (
	"bytes"
	"flag"
	"os"
	"regexp"
	"testing"
)

var updateREADME = flag.Bool("update-readme", false, "rewrite the README's reference from the commands' --help")

// TestREADMEReference: the README's reference shows exactly what each
// command's --help prints, so the documented flags are the real ones.
// `go test ./cmd/reconciler -run READMEReference -update-readme` rewrites it.
func TestREADMEReference(t *testing.T) {
	const path = "../../README.md"
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range commandNames {
		var stdout, stderr bytes.Buffer
		if code := run([]string{cmd, "--help"}, &stdout, &stderr); code != 0 {
			t.Fatalf("%s --help exited %d: %s", cmd, code, stderr.String())
		}
		block := regexp.MustCompile("(?s)(### `reconciler " + cmd + "`\n\n```text\n)(.*?)(```)")
		section := block.FindSubmatch(readme)
		switch {
		case section == nil:
			t.Errorf("README has no reference section for reconciler %s", cmd)
		case *updateREADME:
			readme = block.ReplaceAllFunc(readme, func([]byte) []byte {
				return append(append(append([]byte{}, section[1]...), stdout.Bytes()...), section[3]...)
			})
		case string(section[2]) != stdout.String():
			t.Errorf("README's reference of reconciler %s differs from `reconciler %s --help` (-update-readme rewrites it):\n%s", cmd, cmd, stdout.String())
		}
	}
	if *updateREADME {
		if err := os.WriteFile(path, readme, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
