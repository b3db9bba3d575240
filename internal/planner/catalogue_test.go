package planner

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/golden"
)

// catalogueCases are the planner cases docs/steps.md lists the steps of:
// each example plan against the state of a cluster that no phase has
// touched (every phase approved), and each rollback case.
var catalogueCases = []struct {
	plan, file, title string
	// all approves every phase instead of the case's spec.approve.
	all bool
}{
	{"capi-quickstart", "01-fresh-cluster", "adopt (`plans/capi-quickstart.yaml`): every phase approved, nothing done yet", true},
	{"kamaji-quickstart", "01-fresh-cluster", "adopt with Kamaji (`plans/kamaji-quickstart.yaml`): every phase approved, nothing done yet", true},
	{"vsphere-workers", "01-prepare", "replace (`plans/vsphere-workers.yaml`): every phase approved, nothing done yet", true},
	{"vsphere-workers", "03-cutover-awaits-dns", "replace at the DNS gate: the cutover drained, cleanup not approved yet", false},
	{"vsphere-gateway", "01-gateway-created", "replace with a gateway (`plans/vsphere-gateway.yaml`): every phase approved, the gateway built", true},
	{"capi-quickstart", "08-rollback-to-none", "adopt rolled back to `none` after every phase succeeded", false},
	{"kamaji-quickstart", "03-rollback-to-none", "Kamaji rolled back to `none` after every phase succeeded", false},
	{"vsphere-gateway", "07-rollback-to-infrastructure", "replace rolled back to `infrastructure` after the cutover", false},
}

// TestStepCatalogue: docs/steps.md lists the steps the planner plans for
// the example plans, generated here, so the catalogue is the code's.
// `go test ./internal/planner -run StepCatalogue -update` rewrites it.
func TestStepCatalogue(t *testing.T) {
	var b strings.Builder
	for _, cc := range catalogueCases {
		p := loadExample(t, cc.plan)
		c := loadCase(t, filepath.Join("testdata", "cases", cc.plan, cc.file+".yaml"))
		p.Spec.Approve = c.Approve
		if cc.all {
			p.Spec.Approve = p.Phases()[len(p.Phases())-1]
		}
		if c.Rollback != "" {
			p.Spec.Rollback = &v1alpha1.Rollback{To: c.Rollback}
		}
		res, err := Plan(p, &c.Snapshot)
		if err != nil {
			t.Fatalf("%s/%s: %v", cc.plan, cc.file, err)
		}
		fmt.Fprintf(&b, "### %s\n\n", cc.title)
		fmt.Fprintf(&b, "From `internal/planner/testdata/cases/%s/%s.yaml`.\n", cc.plan, cc.file)
		for _, ph := range res.Phases {
			if len(ph.Groups) == 0 {
				continue
			}
			what := "Phase"
			if ph.Undo {
				what = "Undo of phase"
			}
			fmt.Fprintf(&b, "\n%s `%s` (%s):\n\n```text\n", what, ph.Name, phaseSummary(res, ph))
			for i, g := range ph.Groups {
				for j, s := range g.Steps {
					num := fmt.Sprintf("%d.", i+1)
					if j > 0 {
						num = strings.Repeat(" ", len(num))
					}
					fmt.Fprintf(&b, "%s %s\n", num, s)
				}
			}
			b.WriteString("```\n")
		}
		if len(res.NotUndone) > 0 {
			b.WriteString("\nWhat the rollback leaves as it is:\n\n")
			for _, line := range res.NotUndone {
				fmt.Fprintf(&b, "- %s\n", line)
			}
		}
		b.WriteString("\n")
	}
	got := b.String()
	// Every action the step contract defines appears in the catalogue,
	// or it misses part of the code. Label is the exception: it labels
	// a taken-over Secret that is already in its namespace, which no
	// case of a fresh cluster has.
	for _, a := range step.Actions() {
		if a != step.Label && !strings.Contains(got, ": "+string(a)+" ") {
			t.Errorf("the catalogue has no %s step: add a case that plans one", a)
		}
	}
	golden.CheckSection(t, filepath.Join("..", "..", "docs", "steps.md"), "catalogue", []byte(got))
}
