package reconciler

import (
	"context"
	"io"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/planner"
)

// DryRun is what `reconciler plan` prints and what a pull request's
// preview shows for a plan: its live state observed, planned, and nothing
// changed. The loop runs the same observation and planning, then publishes.
type DryRun struct {
	// Snapshot is what was observed; nil when observation failed.
	Snapshot *observed.Snapshot
	// Result is the planner's; nil when observation or planning failed.
	Result *planner.Result
}

// Plan observes p's live state (record is the loop's memory of the plan;
// the zero value for a plan the loop never saw) and plans it. An error
// with a nil Snapshot is the observation's; with one, the planner's.
func Plan(ctx context.Context, obs Observer, p *v1alpha1.MigrationPlan, record observed.Record) (DryRun, error) {
	snap, err := obs.Observe(ctx, p, record)
	if err != nil {
		return DryRun{}, err
	}
	res, err := planner.Plan(p, snap)
	if err != nil {
		return DryRun{Snapshot: snap}, err
	}
	return DryRun{Snapshot: snap, Result: res}, nil
}

// Render writes the steps as text (planner.Render).
func (d DryRun) Render(w io.Writer, p *v1alpha1.MigrationPlan) error {
	return planner.Render(w, p, d.Result)
}

// Notes say which parts of the live state could not be read (the workload
// cluster, the cloud): the steps are planned without them.
func (d DryRun) Notes() []string {
	var notes []string
	for _, n := range []string{d.Snapshot.WorkloadError, d.Snapshot.CloudError} {
		if n != "" {
			notes = append(notes, "note: "+n)
		}
	}
	return notes
}
