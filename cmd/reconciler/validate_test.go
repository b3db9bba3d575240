package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
