//go:build openstack

package kube_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	infrav1alpha1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1alpha1"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/executor"
	"github.com/ferry-dev/ferry/internal/executor/kube"
	"github.com/ferry-dev/ferry/internal/executor/openstack"
	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/observer"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/ostest"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// gatewayWorld is the gateway test's management cluster, cloud and the
// executors the planner's steps go to.
type gatewayWorld struct {
	t     *testing.T
	f     *ostest.Fixture
	c     client.Client
	plan  *v1alpha1.MigrationPlan
	obs   *observer.Observer
	execs map[step.Kind]executor.Executor
}

// TestGatewayOpenStack builds, replaces and removes the replace strategy's
// gateway through the planner and the kube executor, with the real CAPO
// manager reconciling the OpenStackServers against the local OpenStack.
// It checks the world after each stage: an ACTIVE Nova server with the
// plan's flavor and image; after a flavor change, the new server ACTIVE
// while the old one still runs, then the old one gone; after cleanup, no
// gateway server left in Nova, and a user's OpenStackServer (and its
// server) untouched.
func TestGatewayOpenStack(t *testing.T) {
	f := ostest.New(t, "gw")
	k := testenv.StartKube(t)
	testenv.StartManagers(t, k, testenv.CAPOManager)
	ctx, cancel := context.WithTimeout(logging.With(context.Background(), testenv.Logger(t)), 12*time.Minute)
	defer cancel()
	w := newGatewayWorld(t, ctx, f, k)

	// prepare's keypair step (the gateway is built with it), then
	// network-bridge: the gateway is built and waited for.
	w.runPhase(ctx, v1alpha1.PhasePrepare, observed.Record{}, func(st step.Step) bool { return st.Action == step.EnsureKeypair }, nil)
	w.runPhase(ctx, v1alpha1.PhaseNetworkBridge, observed.Record{}, nil, nil)
	first := w.plan.Spec.Replace.Gateway.ServerName()
	firstID := w.checkActive(ctx, first, f.FlavorID)

	// A new flavor: a new OpenStackServer, ACTIVE before the old one goes.
	flavor2, flavor2ID := f.ExtraFlavor(t, "ferry.gateway", 640)
	w.plan.Spec.Replace.Gateway.Flavor = flavor2
	second := w.plan.Spec.Replace.Gateway.ServerName()
	if second == first {
		t.Fatalf("gateway name %s did not change with the flavor", second)
	}
	deletedOld := false
	w.runPhase(ctx, v1alpha1.PhaseNetworkBridge, observed.Record{}, nil, func(st step.Step) {
		if st.Action != step.Delete || st.Target.Name != first {
			return
		}
		deletedOld = true
		w.checkActive(ctx, second, flavor2ID)
		if old, err := f.Server(ctx, firstID); err != nil || old == nil || old.Status != "ACTIVE" {
			t.Errorf("before the old gateway is deleted its server %s must still run: %+v, %v", firstID, old, err)
		}
	})
	if !deletedOld {
		t.Fatalf("no step deleted the old gateway %s", first)
	}
	secondID := w.checkActive(ctx, second, flavor2ID)
	w.checkGone(ctx, first, firstID)

	// A user's OpenStackServer, with a name ferry once used: CAPO builds
	// it, ferry never deletes it, not even when asked to directly.
	user := w.userServer(ctx, first)
	userID := w.waitServerID(ctx, first)
	w.refuseDelete(ctx, first)

	// Cleanup removes the gateway ferry created, and only that.
	w.plan.Spec.Approve = v1alpha1.PhaseCleanup
	cleanup := observed.Record{Approved: v1alpha1.PhaseCleanup}
	w.runPhase(ctx, v1alpha1.PhaseCleanup, cleanup, func(st step.Step) bool { return st.Target.Kind == step.OpenStackServer }, nil)
	w.checkGone(ctx, second, secondID)
	if ids, err := f.ServersNamed(ctx, second); err != nil || len(ids) != 0 {
		t.Errorf("Nova servers named %s after cleanup: %v, %v", second, ids, err)
	}
	if err := w.c.Get(ctx, client.ObjectKeyFromObject(user), &infrav1alpha1.OpenStackServer{}); err != nil {
		t.Errorf("the user's OpenStackServer %s after cleanup: %v", first, err)
	}
	if srv, err := f.Server(ctx, userID); err != nil || srv == nil {
		t.Errorf("the user's Nova server %s after cleanup: %+v, %v", userID, srv, err)
	}
}

func newGatewayWorld(t *testing.T, ctx context.Context, f *ostest.Fixture, k *testenv.Kube) *gatewayWorld {
	t.Helper()
	const ns = "default"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw-cloud-config"}, Data: map[string][]byte{"clouds.yaml": f.Creds.CloudsYAML}}
	if err := k.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	p := &v1alpha1.MigrationPlan{Metadata: v1alpha1.Metadata{Name: "gw-" + f.Suffix}, Spec: v1alpha1.Spec{
		Cluster:  v1alpha1.ClusterRef{Name: "gw", Namespace: ns},
		Strategy: v1alpha1.StrategyReplace,
		Approve:  v1alpha1.PhaseNetworkBridge,
		Replace: &v1alpha1.ReplaceOptions{OldMachineDeployments: []string{"gw-md-0"},
			Gateway: &v1alpha1.Gateway{Name: "vpn", Flavor: f.Flavor, Image: f.Image}},
		Target: v1alpha1.Target{
			Network:      v1alpha1.ResourceRef{Name: f.Network},
			SSHKey:       v1alpha1.SSHKey{Name: "gw-key-" + f.Suffix, PublicKey: f.PublicKey},
			ControlPlane: v1alpha1.ControlPlane{Provider: v1alpha1.ProviderKamaji},
		},
		Timeouts: &v1alpha1.Timeouts{Wait: "4m"},
	}}
	v1alpha1.Default(p)
	ke, err := kube.New(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &gatewayWorld{t: t, f: f, c: k.Client, plan: p,
		obs:   &observer.Observer{Client: k.Client, Cloud: &observer.OpenStack{Client: k.Client, MaxAge: -1}},
		execs: map[step.Kind]executor.Executor{step.Kube: ke, step.OpenStack: &openstack.Executor{Client: k.Client}},
	}
}

// runPhase observes, plans and runs the first group of phase, again and
// again, until the phase has no steps left that keep selects (nil keeps
// all); before is called ahead of each step. Every step runs twice, as a
// redelivery would run it.
func (w *gatewayWorld) runPhase(ctx context.Context, phase string, record observed.Record, keep func(step.Step) bool, before func(step.Step)) {
	t := w.t
	t.Helper()
	for round := 0; ; round++ {
		if round > 12 {
			t.Fatalf("phase %s: no end after %d groups", phase, round)
		}
		snap, err := w.obs.Observe(ctx, w.plan, record)
		if err != nil {
			t.Fatalf("observe: %v", err)
		}
		res, err := planner.Plan(w.plan, snap)
		if err != nil {
			t.Fatal(err)
		}
		var group []step.Step
		for _, g := range res.Phase(phase).Groups {
			for _, st := range g.Steps {
				if keep == nil || keep(st) {
					group = append(group, st)
				}
			}
			if len(group) > 0 {
				break
			}
		}
		if len(group) == 0 {
			return
		}
		for _, st := range group {
			if before != nil {
				before(st)
			}
			w.run(ctx, st)
		}
	}
}

func (w *gatewayWorld) run(ctx context.Context, st step.Step) {
	t := w.t
	t.Helper()
	ev := events.NewStepEvent(w.plan.Metadata.Name, "rev-1", st, time.Now())
	for attempt := 1; attempt <= 2; attempt++ {
		rep, err := w.execs[st.Executor].Execute(ctx, ev)
		if err != nil {
			t.Fatalf("%s, attempt %d: %v", st, attempt, err)
		}
		t.Logf("%s (attempt %d): %s", st.Key, attempt, rep.Message)
	}
}

// checkActive checks the gateway OpenStackServer name: ferry's labels,
// ready, and its Nova server ACTIVE with flavorID and the fixture's image.
// It returns the server's ID.
func (w *gatewayWorld) checkActive(ctx context.Context, name, flavorID string) string {
	t := w.t
	t.Helper()
	var oss infrav1alpha1.OpenStackServer
	testenv.MustGet(t, w.c, "default", name, &oss)
	testenv.Expect(t, name+" plan label", oss.Labels[observed.LabelPlan], w.plan.Metadata.Name)
	testenv.Expect(t, name+" gateway label", oss.Labels[observed.LabelGateway], "vpn")
	testenv.Expect(t, name+" ready", oss.Status.Ready, true)
	testenv.Expect(t, name+" network", oss.Spec.Ports, []infrav1.PortOpts{{Network: &infrav1.NetworkParam{Filter: &infrav1.NetworkFilter{Name: w.f.Network}}}})
	id := ptr.Deref(oss.Status.InstanceID, "")
	srv, err := w.f.Server(ctx, id)
	if err != nil || srv == nil {
		t.Fatalf("Nova server %q of %s: %+v, %v", id, name, srv, err)
	}
	testenv.Expect(t, name+" Nova status", srv.Status, "ACTIVE")
	testenv.Expect(t, name+" Nova name", srv.Name, name)
	testenv.Expect(t, name+" Nova flavor", srv.FlavorID, flavorID)
	testenv.Expect(t, name+" Nova image", srv.ImageID, w.f.ImageID)
	return id
}

// checkGone checks that the OpenStackServer name and its Nova server id
// no longer exist.
func (w *gatewayWorld) checkGone(ctx context.Context, name, id string) {
	t := w.t
	t.Helper()
	err := w.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &infrav1alpha1.OpenStackServer{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("OpenStackServer %s: %v; want it gone", name, err)
	}
	if srv, err := w.f.Server(ctx, id); err != nil || srv != nil {
		t.Errorf("Nova server %s of %s: %+v, %v; want it gone", id, name, srv, err)
	}
}

// userServer creates an OpenStackServer as a user would: no ferry labels.
func (w *gatewayWorld) userServer(ctx context.Context, name string) *infrav1alpha1.OpenStackServer {
	t := w.t
	t.Helper()
	oss := &infrav1alpha1.OpenStackServer{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: infrav1alpha1.OpenStackServerSpec{
		Flavor:      ptr.To(w.f.Flavor),
		Image:       infrav1.ImageParam{Filter: &infrav1.ImageFilter{Name: ptr.To(w.f.Image)}},
		IdentityRef: infrav1.OpenStackIdentityReference{Name: "gw-cloud-config", CloudName: "openstack"},
		Ports:       []infrav1.PortOpts{{Network: &infrav1.NetworkParam{Filter: &infrav1.NetworkFilter{Name: w.f.Network}}}},
	}}
	if err := w.c.Create(ctx, oss); err != nil {
		t.Fatal(err)
	}
	return oss
}

// waitServerID waits until CAPO reports the OpenStackServer ready, and
// returns its Nova server's ID.
func (w *gatewayWorld) waitServerID(ctx context.Context, name string) string {
	t := w.t
	t.Helper()
	for ctx.Err() == nil {
		var oss infrav1alpha1.OpenStackServer
		testenv.MustGet(t, w.c, "default", name, &oss)
		if oss.Status.Ready && oss.Status.InstanceID != nil {
			return *oss.Status.InstanceID
		}
		time.Sleep(2 * time.Second)
	}
	t.Fatalf("OpenStackServer %s never became ready", name)
	return ""
}

// refuseDelete asks the kube executor to delete an OpenStackServer ferry
// did not create: the step must fail for good and the object stay.
func (w *gatewayWorld) refuseDelete(ctx context.Context, name string) {
	t := w.t
	t.Helper()
	target := step.Target{Kind: step.OpenStackServer, Namespace: "default", Name: name}
	st := step.Step{Key: step.Key(v1alpha1.PhaseCleanup, step.Delete, target), Phase: v1alpha1.PhaseCleanup, Executor: step.Kube, Action: step.Delete,
		Target: target, Inputs: &step.Inputs{Cluster: v1alpha1.ClusterRef{Name: "gw", Namespace: "default"}}}
	_, err := w.execs[step.Kube].Execute(ctx, events.NewStepEvent(w.plan.Metadata.Name, "rev-1", st, time.Now()))
	if err == nil || !failure.IsTerminal(err) || !strings.Contains(err.Error(), "ferry deletes only the gateways it created") {
		t.Errorf("delete of a user's OpenStackServer: %v; want a terminal refusal", err)
	}
	testenv.MustGet(t, w.c, "default", name, &infrav1alpha1.OpenStackServer{})
}
