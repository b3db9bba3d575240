package testenv

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/planfile"
)

// examplePlan is the repository's example plan, which the tests migrate.
const examplePlan = "capi-quickstart.yaml"

// ExamplePlan returns plans/capi-quickstart.yaml with spec.approve set to
// phase ("" for none): the one way tests write the example plan at a phase.
func ExamplePlan(t T, phase string) string {
	t.Helper()
	path := filepath.Join(RepoRoot(t), "plans", examplePlan)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	const line = "  approve: \"\"\n"
	if !strings.Contains(string(data), line) {
		t.Fatalf("testenv: %s has no %q line", path, line)
	}
	return strings.Replace(string(data), line, "  approve: \""+phase+"\"\n", 1)
}

// ExamplePlanDecoded is ExamplePlan, decoded and defaulted.
func ExamplePlanDecoded(t T, phase string) *v1alpha1.MigrationPlan {
	t.Helper()
	f, err := planfile.Decode("plans/"+examplePlan, []byte(ExamplePlan(t, phase)))
	if err != nil {
		t.Fatalf("testenv: decode the example plan: %v", err)
	}
	return f.Plan
}
