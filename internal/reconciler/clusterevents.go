package reconciler

import (
	"context"

	"github.com/ferry-dev/ferry/internal/clusterevents"
)

// ClusterEvents writes Kubernetes Events on the Cluster a plan migrates
// ("namespace/name"). Record must not block: the recorder calls it with
// its lock held, so that a plan's Events keep the order of its changes.
type ClusterEvents interface {
	Record(ctx context.Context, cluster string, events []clusterevents.Event)
}

var _ ClusterEvents = (*clusterevents.Recorder)(nil)

// reportLocked hands Events what changed in the plan's status since the
// last report: phase transitions and steps that failed for good. r.mu is
// held. The baseline is the status as restored at start, so that a
// restart reports nothing that was already reported and recorded. Until
// the planner has named the plan's Cluster (results replayed before the
// first cycle), nothing is reported and the baseline stays: the first
// report after covers what happened meanwhile.
func (r *StatusRecorder) reportLocked(ctx context.Context, plan string) {
	st, cluster := r.statuses[plan], r.clusters[plan]
	if r.Events == nil || st == nil || cluster == "" {
		return
	}
	r.Events.Record(ctx, cluster, clusterevents.Transitions(r.reported[plan], st))
	r.reported[plan] = clusterevents.MarksOf(st)
}
