package reconciler

// The merge gate: the commit status ferry/preview on the head of every pull
// request that changes a plan file, which branch protection can require
// before a merge.

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/status"
)

// GateContext is the commit status context of the merge gate.
const GateContext = "ferry/preview"

// pullPlans is what the head of a pull request holds of the plan files it
// changes, as the gate reads them.
type pullPlans struct {
	head  string
	title string
	files []changedFile // in path order
}

// changedFile is one plan file a pull request changes.
type changedFile struct {
	path string
	// problems is how many validation problems the file has at the head;
	// plan is nil when it has any, or when the head removes the file.
	problems int
	plan     *v1alpha1.MigrationPlan
}

// verdict is the gate's answer on a pull request: success, or failure
// with the reasons, one sentence each.
type verdict struct {
	state   string
	reasons []string
	files   int
	// conflict: another open pull request raises the same plan; closing
	// it changes no head, so the verdict is judged again every pass.
	conflict bool
}

// description is the commit status's description: the first reason (and
// how many more the comment lists), or what passed.
func (v verdict) description() string {
	var d string
	switch {
	case len(v.reasons) == 1:
		d = v.reasons[0]
	case len(v.reasons) > 1:
		d = fmt.Sprintf("%s (and %d more in the preview)", v.reasons[0], len(v.reasons)-1)
	case v.files == 0:
		d = "changes no plan file"
	default:
		d = fmt.Sprintf("%d plan file(s) valid; the steps are in the preview", v.files)
	}
	return d
}

// basePlans are the valid plans of the tracked branch's head, by file
// path and by plan name.
type basePlans struct {
	rev    string
	byPath map[string]*v1alpha1.MigrationPlan
	byName map[string]*v1alpha1.MigrationPlan
}

// raises is the plan names whose spec.approve the pull request moves
// forward from the branch's, without a rollback.
func (pp *pullPlans) raises(base basePlans) []string {
	var out []string
	for _, f := range pp.files {
		if f.plan == nil || f.plan.Spec.Rollback != nil {
			continue
		}
		from := base.byName[f.plan.Metadata.Name]
		if f.plan.PhaseIndex(f.plan.Spec.Approve) > approveIndex(from) {
			out = append(out, f.plan.Metadata.Name)
		}
	}
	return out
}

// approveIndex is the index of a plan's spec.approve among its phases; -1
// for a plan that is not on the branch or approves nothing.
func approveIndex(p *v1alpha1.MigrationPlan) int {
	if p == nil {
		return -1
	}
	return p.PhaseIndex(p.Spec.Approve)
}

// stopWord is how a pull request says it stops a running plan on purpose.
var stopWord = regexp.MustCompile(`(?i)\bstop\b`)

// gate judges pull request n, whose head holds pp: it fails when a plan it
// changes is invalid, when it stops a running plan (removes its file or
// lowers its spec.approve below the running phase) without "stop" in its
// title, when it raises spec.approve over a phase, or when another open
// pull request (raisedBy: plan name -> pull requests) raises the same
// plan's spec.approve. running is the phase of a plan that runs now, ""
// when none does.
func gate(n int, pp *pullPlans, base basePlans, raisedBy map[string][]int, running func(plan string) string) verdict {
	v := verdict{state: forge.StateSuccess}
	fail := func(format string, args ...any) {
		v.reasons = append(v.reasons, fmt.Sprintf(format, args...))
	}
	saysStop := stopWord.MatchString(pp.title)
	for _, f := range pp.files {
		was := base.byPath[f.path]
		switch {
		case f.problems > 0:
			fail("%s is invalid (%d problem(s))", f.path, f.problems)
			continue
		case f.plan == nil:
			if was != nil && !saysStop {
				if r := running(was.Metadata.Name); r != "" {
					fail("removes plan %s while its phase %s runs; say stop in the title to merge it anyway", was.Metadata.Name, r)
				}
			}
			continue
		}
		v.files++
		p, name := f.plan, f.plan.Metadata.Name
		from, to := approveIndex(base.byName[name]), p.PhaseIndex(p.Spec.Approve)
		if p.Spec.Rollback != nil {
			continue // a rollback says what it stops, and approves no phase forward
		}
		if r := running(name); r != "" && to < p.PhaseIndex(r) && !saysStop {
			fail("lowers spec.approve of plan %s below its running phase %s; say stop in the title to merge it anyway", name, r)
		}
		if to > from+1 {
			phases := p.Phases()
			fail("raises spec.approve of plan %s to %s over %s: approve one phase per pull request", name, p.Spec.Approve, strings.Join(phases[from+1:to], ", "))
		}
		if to > from {
			if others := slices.DeleteFunc(slices.Clone(raisedBy[name]), func(m int) bool { return m == n }); len(others) > 0 {
				fail("raises spec.approve of plan %s, as %s also does: merge one at a time", name, pullList(others))
				v.conflict = true
			}
		}
	}
	if len(v.reasons) > 0 {
		v.state = forge.StateFailure
	}
	return v
}

// pullList writes pull request numbers as "#3" or "#3 and #7" or
// "#3, #5 and #7".
func pullList(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = fmt.Sprintf("#%d", n)
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// RunningPhase is the phase of st that runs now (Running or RollingBack),
// "" when none does or st is nil. The merge gate asks it of the status.
func RunningPhase(st *status.PlanStatus) string {
	if st == nil {
		return ""
	}
	for _, ph := range st.Phases {
		if ph.State == status.PhaseRunning || ph.State == status.PhaseRollingBack {
			return ph.Name
		}
	}
	return ""
}
