package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/testing/ostest"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// scenario is one migration the demo can run: which cluster it builds, the
// plan's phases (one pull request each) and how to build its fixture.
type scenario struct {
	// name is the value of --scenario; seed what it migrates, for the
	// progress output.
	name, seed string
	// cluster names the cluster and its plan (plans/<cluster>.yaml).
	cluster string
	phases  []string
	// build makes the cluster to migrate, its cloud and API servers, and
	// starts the controllers that act on it.
	build func(ctx context.Context, r *testenv.Program, out *display) (*fixture, error)
	// rollback: the scenario rolls phases back through a pull request
	// and compares what the rollback left with how it was (rollback.go):
	// after the last phase every phase back (spec.rollback.to: none),
	// unless run says otherwise.
	rollback bool
	// run, when set, is what the scenario does in its world instead of
	// migrating through every phase and checking the fixture: the
	// rollback scenarios' cycles (rollbackCycles) and the replace
	// rollback (rollbackReplace).
	run func(ctx context.Context, w *world) error
	// timeout, when set, is the scenario's own default for --timeout.
	timeout time.Duration
}

// fixture is what a scenario built, as the world uses it.
type fixture struct {
	// cloud is the project and the API servers: the end state reads the
	// project from it (State), ferry runs against its Mgmt.
	cloud *ostest.Adoptable
	// plan is the plan approving phase approve (`""` for none), with
	// extra (lines of spec, such as a rollback's: undo.spec) inside its spec.
	plan func(approve, extra string) string
	// files are the plans repository's other files (manifests).
	files map[string]string
	// checks are what the real controllers made of the migrated cluster.
	checks func(ctx context.Context) []ostest.Check
	// endpoint checks that the cluster's endpoint answers (nil when the
	// fixture has none to check).
	endpoint func(ctx context.Context) ostest.Check
	// settle is how long after the last phase the checks begin.
	settle time.Duration
	// normalize, when set, writes what differs between two undisturbed
	// runs of the scenario (generated names, new servers' IDs and
	// addresses) as placeholders, after the cloud's normalizer.
	normalize func(string) string
	// drain follows the replace scenario's cutover (nil for the others).
	drain *drainWatch
	// progress, when set, says in a line how the workload fares, after
	// each phase (the replace scenario's caller).
	progress func(ctx context.Context) string
}

// The phases of the two strategies' plans.
var (
	adoptPhases   = []string{"cluster", "control-plane", "workers"}
	replacePhases = []string{"prepare", "network-bridge", "infrastructure", "workers", "cutover", "cleanup"}
)

// scenarios are the demos `--scenario` chooses from, the default first.
var scenarios = []*scenario{
	{name: "adopt", seed: "seed 000: adopt a kubeadm cluster on OpenStack servers", cluster: "capi-quickstart",
		phases: adoptPhases, build: buildAdopt},
	{name: "replace", seed: "seed 003 with a seed 002 gateway: move the workers of a hosted cluster onto new servers", cluster: "tenant-a",
		phases: replacePhases, build: buildReplace},
	{name: "kamaji", seed: "seed 004: adopt a cluster whose control plane Kamaji hosts", cluster: "kamaji-quickstart",
		phases: adoptPhases, build: buildKamaji},
	{name: "rollback", seed: "seed 000: adopt a kubeadm cluster on OpenStack servers, roll it back after each phase in turn, then once more after the last with the reconciler killed during the undo, then adopt it again", cluster: "capi-quickstart",
		phases: adoptPhases, build: buildAdopt, rollback: true, run: rollbackCycles(adoptPhases, true, true), timeout: 25 * time.Minute},
	{name: "rollback-kamaji", seed: "seed 004: adopt a cluster whose control plane Kamaji hosts, then roll every phase back", cluster: "kamaji-quickstart",
		phases: adoptPhases, build: buildKamaji, rollback: true, run: rollbackCycles(adoptPhases[len(adoptPhases)-1:], false, false)},
	{name: "rollback-replace", seed: "seed 003 with a seed 002 gateway: move the workers onto new servers up to the cutover, then roll back to infrastructure", cluster: "tenant-a",
		phases: replacePhases, build: buildReplace, rollback: true, run: rollbackReplace},
}

// scenarioNamed returns the scenario called name, or an error naming the
// ones there are.
func scenarioNamed(name string) (*scenario, error) {
	i := slices.IndexFunc(scenarios, func(s *scenario) bool { return s.name == name })
	if i < 0 {
		var names []string
		for _, s := range scenarios {
			names = append(names, s.name)
		}
		return nil, fmt.Errorf("unknown scenario %q: choose one of %s", name, strings.Join(names, ", "))
	}
	return scenarios[i], nil
}

// planPath is the plan's path in the plans repository.
func (s *scenario) planPath() string { return "plans/" + s.cluster + ".yaml" }

// progressKey is the key of ferry's progress comment for the plan.
func (s *scenario) progressKey() string { return "progress/" + s.cluster }

const ccmPath = "manifests/ccm.yaml"

func buildAdopt(_ context.Context, r *testenv.Program, out *display) (*fixture, error) {
	out.say("==> building the cluster to adopt: a project, networks and servers in the local OpenStack, and two API servers")
	a := ostest.NewAdoptable(r, "capi-quickstart")
	out.say("    servers (and nodes): %s", strings.Join(append(slices.Clone(a.ControlPlane), a.Workers...), ", "))
	before := a.Record(r)
	out.say("==> starting the real Cluster API and CAPO controller managers against the management API server")
	testenv.StartManagers(r, a.Mgmt)
	return &fixture{
		cloud: a,
		plan: func(approve, extra string) string {
			return a.Plan(approve, "  manifests:\n    cloudControllerManager: {path: "+ccmPath+"}\n"+extra)
		},
		files:    map[string]string{ccmPath: testenv.CCMManifest},
		checks:   func(ctx context.Context) []ostest.Check { return a.Verify(ctx, before) },
		endpoint: a.CheckEndpoint,
		settle:   time.Minute,
	}, nil
}

func buildKamaji(_ context.Context, r *testenv.Program, out *display) (*fixture, error) {
	out.say("==> building the cluster to adopt: a KamajiControlPlane hosting its control plane, worker servers in the local OpenStack, two API servers")
	h := ostest.NewHosted(r, "kamaji-quickstart")
	out.say("    %s", h)
	before := h.Record(r)
	out.say("==> starting the real Cluster API and CAPO controller managers, and the labelled stand-in for Kamaji's controller")
	testenv.StartManagers(r, h.Mgmt)
	testenv.StartKamajiStandIn(r, h.Mgmt)
	return &fixture{
		cloud:    h.Adoptable,
		plan:     func(approve, extra string) string { return specWith(h.Plan(approve, ccmPath), extra) },
		files:    map[string]string{ccmPath: testenv.CCMManifest},
		checks:   func(ctx context.Context) []ostest.Check { return h.Verify(ctx, before) },
		endpoint: h.CheckEndpoint,
		settle:   time.Minute,
	}, nil
}

// specWith is plan with extra, lines of spec, inserted before its
// spec.approve: for the plans of ostest whose builder takes no extra.
func specWith(plan, extra string) string {
	return strings.Replace(plan, "\n  approve: ", "\n"+extra+"  approve: ", 1)
}
