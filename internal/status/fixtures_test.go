package status_test

import (
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/testing/statustest"
)

// The fixtures are statustest's, shared with the renderers', the status
// file's and the store's tests; these short names keep the tables below
// reading as the loop's operations on a status.
var (
	t0, at     = statustest.T0, statustest.At
	rev1, rev2 = statustest.Rev1, statustest.Rev2

	mkStep                                  = statustest.Step
	copySecret, keypair, mkCluster, waitOSC = statustest.CopySecret, statustest.Keypair, statustest.MkCluster, statustest.WaitOSC
	mkKCP, waitKCP, drain, probe            = statustest.MkKCP, statustest.WaitKCP, statustest.Drain, statustest.Probe

	phase, result            = statustest.Phase, statustest.Result
	freshResult, clusterLeft = statustest.FreshResult, statustest.ClusterLeft
	cleanupResult            = statustest.CleanupResult
	evt, ok                  = statustest.Event, statustest.OK

	plan, publish, apply, run = statustest.Plan, statustest.Publish, statustest.Apply, statustest.Run
	summary                   = statustest.Summary
)

// op is one thing the reconciler loop does to a status.
type op = statustest.Op

// incomplete marks a planned phase as one the planner could not see whole.
func incomplete(ph planner.Phase) planner.Phase {
	ph.Incomplete = true
	return ph
}
