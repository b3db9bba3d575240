package reconciler

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/planfile"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

const quickstart = "plans/capi-quickstart.yaml"

// TestGate: each rule of the merge gate, alone, against a branch whose
// plan approves cluster.
func TestGate(t *testing.T) {
	at := func(phase string) *v1alpha1.MigrationPlan { return testenv.ExamplePlanDecoded(t, phase) }
	rolledBack := at("cluster")
	rolledBack.Spec.Rollback = &v1alpha1.Rollback{To: v1alpha1.RollbackNone}
	base := basePlans{byPath: map[string]*v1alpha1.MigrationPlan{quickstart: at("cluster")},
		byName: map[string]*v1alpha1.MigrationPlan{"capi-quickstart": at("cluster")}}
	idle := func(string) string { return "" }
	runningCP := func(string) string { return v1alpha1.PhaseControlPlane }
	for _, tc := range []struct {
		name     string
		title    string
		file     changedFile
		raisedBy map[string][]int
		running  func(string) string
		want     string // "" for success, else a part of the first reason
	}{
		{name: "raises one phase", file: changedFile{path: quickstart, plan: at("control-plane")}},
		{name: "invalid", file: changedFile{path: quickstart, problems: 2}, want: "plans/capi-quickstart.yaml is invalid (2 problem(s))"},
		{name: "skips a phase", file: changedFile{path: quickstart, plan: at("workers")},
			want: "raises spec.approve of plan capi-quickstart to workers over control-plane: approve one phase per pull request"},
		{name: "a second pull request raises it too", file: changedFile{path: quickstart, plan: at("control-plane")},
			raisedBy: map[string][]int{"capi-quickstart": {1, 4}}, want: "as #4 also does: merge one at a time"},
		{name: "lowers below the running phase", file: changedFile{path: quickstart, plan: at("")}, running: runningCP,
			want: "lowers spec.approve of plan capi-quickstart below its running phase control-plane; say stop in the title"},
		{name: "lowers and says stop", title: "Stop capi-quickstart: the window closed", file: changedFile{path: quickstart, plan: at("")}, running: runningCP},
		{name: "lowers while idle", file: changedFile{path: quickstart, plan: at("")}},
		{name: "removes a running plan", file: changedFile{path: quickstart}, running: runningCP,
			want: "removes plan capi-quickstart while its phase control-plane runs"},
		{name: "removes an idle plan", file: changedFile{path: quickstart}},
		{name: "rolls back a running plan", file: changedFile{path: quickstart, plan: rolledBack}, running: runningCP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			running := tc.running
			if running == nil {
				running = idle
			}
			raisedBy := tc.raisedBy
			if raisedBy == nil {
				raisedBy = map[string][]int{"capi-quickstart": {1}}
			}
			v := gate(1, &pullPlans{title: tc.title, files: []changedFile{tc.file}}, base, raisedBy, running)
			switch {
			case tc.want == "" && v.state != forge.StateSuccess:
				t.Errorf("gate = %s %q, want success", v.state, v.reasons)
			case tc.want != "" && (v.state != forge.StateFailure || len(v.reasons) != 1 || !strings.Contains(v.reasons[0], tc.want)):
				t.Errorf("gate = %s %q, want one failure with %q", v.state, v.reasons, tc.want)
			case len(v.description()) > forge.MaxStatusDescription:
				t.Errorf("description %q is longer than a commit status takes", v.description())
			}
		})
	}
}

// TestPreviewsGate: the gate's commit status on the heads of two pull
// requests that raise the same plan fails on both, is success on the
// second once the branch has the first's approval, and follows a push
// that breaks and then fixes a plan.
func TestPreviewsGate(t *testing.T) {
	ctx := context.Background()
	src := &pulls{
		heads: map[int]string{1: "a1", 2: "b1"},
		trees: map[string]fstest.MapFS{
			"a1": tree(map[string]string{quickstart: testenv.ExamplePlan(t, "control-plane")}),
			"b1": tree(map[string]string{quickstart: testenv.ExamplePlan(t, "control-plane")}),
		},
	}
	fg := &forgeLog{comments: map[int]string{}, prs: []forge.PullRequest{
		{Number: 1, HeadSHA: "a1", BaseRef: "main", Files: []string{quickstart}},
		{Number: 2, HeadSHA: "b1", BaseRef: "main", Files: []string{quickstart}},
	}}
	running := ""
	p := &Previews{Forge: fg, Pulls: src, Observer: &fixedObserver{}, Branch: "main", Path: "plans",
		Running: func(string) string { return running }}
	noRecord := func(string) observed.Record { return observed.Record{} }
	branch := func(rev, phase string) Base {
		f, err := planfile.Decode(quickstart, []byte(testenv.ExamplePlan(t, phase)))
		if err != nil {
			t.Fatal(err)
		}
		return Base{Revision: rev, Files: []*planfile.File{f}}
	}
	gateOf := func(head string) string { return fg.statuses[head+" "+GateContext] }
	update := func(base Base) {
		t.Helper()
		if err := p.Update(ctx, base, noRecord); err != nil {
			t.Fatal(err)
		}
	}

	update(branch("main1", "cluster"))
	for _, head := range []string{"a1", "b1"} {
		if g := gateOf(head); !strings.HasPrefix(g, "failure: ") || !strings.Contains(g, "merge one at a time") {
			t.Errorf("gate of %s with two pull requests raising one plan: %q", head, g)
		}
	}
	if !strings.Contains(fg.comments[2], "as #1 also does") {
		t.Errorf("the preview of #2 does not say why its gate fails:\n%s", fg.comments[2])
	}

	// #1 merged: the branch approves control-plane, #2 raises nothing.
	fg.prs = fg.prs[1:]
	update(branch("main2", "control-plane"))
	if g := gateOf("b1"); g != "success: 1 plan file(s) valid; the steps are in the preview" {
		t.Errorf("gate of #2 after #1 merged: %q", g)
	}

	// A push that breaks the plan, then one that fixes it.
	src.heads = map[int]string{2: "b2"}
	src.trees["b2"] = tree(map[string]string{quickstart: "apiVersion: ferry.dev/v1alpha1\nkind: MigrationPlan\n"})
	fg.prs[0].HeadSHA = "b2"
	update(branch("main2", "control-plane"))
	if g := gateOf("b2"); !strings.HasPrefix(g, "failure: plans/capi-quickstart.yaml is invalid") {
		t.Errorf("gate of an invalid head: %q", g)
	}
	src.heads = map[int]string{2: "b3"}
	src.trees["b3"] = tree(map[string]string{quickstart: testenv.ExamplePlan(t, "workers")})
	fg.prs[0].HeadSHA = "b3"
	update(branch("main2", "control-plane"))
	if g := gateOf("b3"); !strings.HasPrefix(g, "success: ") {
		t.Errorf("gate of the fixed head: %q", g)
	}

	// Lowering approve below the phase that runs fails without "stop".
	running = v1alpha1.PhaseWorkers
	src.heads = map[int]string{2: "b4"}
	src.trees["b4"] = tree(map[string]string{quickstart: testenv.ExamplePlan(t, "control-plane")})
	fg.prs[0].HeadSHA = "b4"
	update(branch("main3", "workers"))
	if g := gateOf("b4"); !strings.Contains(g, "below its running phase workers") {
		t.Errorf("gate of a head that stops the running phase: %q", g)
	}
	if got := RunningPhase(&status.PlanStatus{Phases: []status.PhaseStatus{
		{Name: "cluster", State: status.PhaseSucceeded}, {Name: "control-plane", State: status.PhaseRollingBack}}}); got != "control-plane" {
		t.Errorf("RunningPhase of a plan rolling back control-plane = %q", got)
	}
}
