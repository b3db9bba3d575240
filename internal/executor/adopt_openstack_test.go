//go:build openstack

package executor_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/executor"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/observer"
	"github.com/ferry-dev/ferry/internal/openstack/ostest"
	"github.com/ferry-dev/ferry/internal/planfile"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/testenv"
)

// TestAdoptOpenStack adopts a seed 000 cluster with the three executors
// alone, past the real Cluster API and CAPO managers and the local
// OpenStack: the real planner plans against a real observation (management
// and workload clusters, the cloud), every step of the runnable group is
// executed twice, as a redelivery would, and the loop observes and plans
// again until nothing is left. Wait steps wait for the real controllers.
// Then ostest.Verify checks the world against how it was before: the same
// servers, every Machine Running with its Node, nothing rolled out, no
// certificate regenerated, no stray port, the endpoint kept.
func TestAdoptOpenStack(t *testing.T) {
	a := ostest.NewAdoptable(t, "capi-quickstart")
	before := a.Record(t)
	testenv.StartManagers(t, a.Mgmt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	f, err := planfile.Decode("plans/capi-quickstart.yaml", []byte(a.Plan("workers", "")))
	if err != nil {
		t.Fatal(err)
	}
	plan := f.Plan
	kube := kubeExecutor(t, a.Mgmt)
	log := slog.New(slog.NewTextHandler(kubeTestLog{t}, nil))
	execs := map[string]executor.Executor{
		planner.ExecKube:      kube,
		planner.ExecOpenStack: &executor.OpenStackExecutor{Client: a.Mgmt.Client},
		planner.ExecWorkload:  &executor.WorkloadExecutor{Client: a.Mgmt.Client, Logger: log},
	}
	obs := &observer.Observer{Client: a.Mgmt.Client, Cloud: &observer.OpenStack{Client: a.Mgmt.Client, MaxAge: -1}}

	ran, res := runAdoption(t, ctx, plan, obs, func(*observed.Snapshot) {}, func(st planner.Step) {
		ev := events.NewStepEvent(plan, "rev-1", st, time.Now())
		for attempt := 1; attempt <= 2; attempt++ {
			rep, err := execs[st.Executor].Execute(ctx, ev)
			if err != nil {
				t.Fatalf("%s, attempt %d: %v", st.Key, attempt, err)
			}
			t.Logf("%s (attempt %d): %s", st.Key, attempt, rep.Message)
		}
	})
	for _, ph := range res.Phases {
		if ph.State != planner.Succeeded {
			t.Errorf("phase %s is %s (%s); want Succeeded", ph.Name, ph.State, ph.Reason)
		}
	}
	for _, want := range []string{"bind OpenStackServer", "set-provider-id Node"} {
		if !strings.Contains(strings.Join(ran, "\n"), want) {
			t.Errorf("no step %q ran:\n%s", want, strings.Join(ran, "\n"))
		}
	}
	unpaused := time.Now()

	for _, c := range a.VerifyUntil(ctx, before, unpaused, 2*time.Minute) {
		t.Log(c)
		if !c.OK {
			t.Errorf("adoption check failed: %s", c)
		}
	}
}
