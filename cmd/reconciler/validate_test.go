package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/ferry-dev/ferry/internal/app"
)

func TestValidateCommand(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	example, err := os.ReadFile(filepath.Join("..", "..", "plans", "capi-quickstart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(example), "replicas: 2", "replicas: -2", 1)
	broken = strings.Replace(broken, "strategy: adopt", "strategy: adopt\n  colour: blue", 1)
	if err := os.WriteFile(bad, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []cliCase{
		{args: []string{"validate", "../../plans"}, wantCode: 0, wantStdout: "plans/vsphere-workers.yaml: plan vsphere-workers is valid"},
		{args: []string{"validate", "../../plans/kamaji-quickstart.yaml", "-o", "json"}, wantCode: 0,
			wantStdout: "[\n  {\n    \"path\": \"../../plans/kamaji-quickstart.yaml\",\n    \"plan\": \"kamaji-quickstart\","},
		{args: []string{"validate", "../../plans/kamaji-quickstart.yaml", "-o", "yaml"}, wantCode: 0,
			wantStdout: "- path: ../../plans/kamaji-quickstart.yaml\n  plan: kamaji-quickstart\n"},
		{args: []string{"validate"}, wantCode: 2, wantStderr: []string{"name at least one plan file"}},
		{args: []string{"validate", filepath.Join(dir, "missing.yaml")}, wantCode: 2, wantStderr: []string{"missing.yaml"}},
		{args: []string{"validate", bad, "../../plans/kamaji-quickstart.yaml"}, wantCode: 1, wantStderr: []string{
			bad + ":14: spec.colour: unknown field; expected one of",
			bad + ":45: spec.target.workers[0].replicas: must be >= 1, got -2",
			"2 problem(s); 1 plan(s) valid",
		}},
		{args: []string{"plan"}, wantCode: 2, wantStderr: []string{"name one plan file"}},
		{args: []string{"plan", bad}, wantCode: 1, wantStderr: []string{bad + ":45: spec.target.workers[0].replicas"}},
	} {
		tc.check(t)
	}
}

// A CI job reads validate's problems from stdout with -o json: every
// file, valid or not, with each problem's line, field and message, and
// the exit code still says whether all plans are valid.
func TestValidateJSONProblems(t *testing.T) {
	dir := t.TempDir()
	example, err := os.ReadFile(filepath.Join("..", "..", "plans", "capi-quickstart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, bytes.Replace(example, []byte("replicas: 2"), []byte("replicas: -2"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"json", "yaml"} {
		var stdout, stderr bytes.Buffer
		code := run([]string{"validate", bad, "../../plans/kamaji-quickstart.yaml", "-o", format}, &stdout, &stderr)
		if code != 1 {
			t.Fatalf("-o %s: exit code %d, want 1; stderr: %s", format, code, stderr.String())
		}
		var got []app.CheckedFile
		if err := yaml.Unmarshal(stdout.Bytes(), &got); err != nil { // YAML reads JSON too
			t.Fatalf("-o %s: stdout does not decode: %v\n%s", format, err, stdout.String())
		}
		want := []app.CheckedFile{
			{Path: "../../plans/kamaji-quickstart.yaml", Plan: "kamaji-quickstart", Strategy: "adopt", Provider: "KamajiControlPlane", Valid: true},
			{Path: bad, Problems: []app.Problem{{Line: 44, Field: "spec.target.workers[0].replicas", Message: "must be >= 1, got -2"}}},
		}
		slices.SortFunc(want, func(a, b app.CheckedFile) int { return strings.Compare(a.Path, b.Path) })
		if !reflect.DeepEqual(got, want) {
			t.Errorf("-o %s: stdout decodes to\n%+v\nwant\n%+v", format, got, want)
		}
		if !strings.Contains(stderr.String(), bad+":44: spec.target.workers[0].replicas") {
			t.Errorf("-o %s: stderr lacks the problem: %s", format, stderr.String())
		}
	}
}
