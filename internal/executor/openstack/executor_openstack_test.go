//go:build openstack

package openstack

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/openstack"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/ostest"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestOpenStackExecutor sends openstack steps over the embedded bus to the
// executor, which carries them out against the local OpenStack.
func TestOpenStackExecutor(t *testing.T) {
	f := ostest.New(t, "c1")
	k := testenv.StartKube(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := k.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c1-cloud-config"},
		Data: map[string][]byte{"clouds.yaml": f.Creds.CloudsYAML}}); err != nil {
		t.Fatal(err)
	}
	// The inputs the planner gives the steps of a replace plan c1-<suffix>
	// of one pool, md-0, of replicas machines of image, with the identity
	// Secret's default name.
	planName := "c1-" + f.Suffix
	identity := v1alpha1.Identity{SecretName: "c1-cloud-config", CloudName: "openstack"}
	inputs := func(image string, replicas int) step.Inputs {
		return step.Inputs{
			Cluster:      v1alpha1.ClusterRef{Name: "c1", Namespace: "default"},
			ControlPlane: step.ObjectRef{Kind: step.KamajiControlPlane, Name: "c1-control-plane"},
			Identity:     &identity,
			PublicKey:    f.PublicKey,
			CloudNames:   []v1alpha1.CloudName{{Kind: "flavor", Name: f.Flavor}, {Kind: "image", Name: image}, {Kind: "network", Name: f.Network}},
			Machines:     []v1alpha1.Machines{{Flavor: f.Flavor, Count: replicas}},
		}
	}

	bus, err := events.Connect(ctx, events.BusOptions{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	exec := &Executor{Client: k.Client}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_ = events.RunWorker(wctx, bus.JS, events.WorkerOptions{Kind: exec.Kind(), MaxDeliver: 2, BackOff: 50 * time.Millisecond}, exec.Execute)
	}()
	var mu sync.Mutex
	got := map[string]events.ResultEvent{}
	go func() {
		_ = events.RunResults(wctx, bus.JS, "test", func(_ context.Context, r *events.ResultEvent) error {
			mu.Lock()
			defer mu.Unlock()
			if r.Outcome != events.Retrying {
				got[r.Revision] = *r
			}
			return nil
		})
	}()
	run := func(revision string, in step.Inputs, action step.Action, target step.Target) events.ResultEvent {
		t.Helper()
		ev := events.NewStepEvent(planName, revision, step.Step{Key: step.Key(v1alpha1.PhasePrepare, action, target), Phase: v1alpha1.PhasePrepare, Executor: step.OpenStack,
			Action: action, Target: target, Inputs: &in}, time.Now())
		if _, err := (&events.Publisher{JS: bus.JS}).PublishStep(ctx, ev); err != nil {
			t.Fatal(err)
		}
		for ctx.Err() == nil {
			mu.Lock()
			r, ok := got[revision]
			mu.Unlock()
			if ok {
				return r
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("no result for %s", revision)
		return events.ResultEvent{}
	}
	cloud := step.Target{Kind: step.Cloud, Name: "openstack"}

	if r := run("r1", inputs(f.Image, 2), step.Resolve, cloud); r.Outcome != events.Succeeded || !strings.Contains(r.Message, "network/"+f.Network+"="+f.NetworkID) {
		t.Errorf("resolve: %+v", r)
	}
	r := run("r2", inputs("missing-"+f.Suffix, 2), step.Resolve, cloud)
	if r.Outcome != events.Failed || !r.Terminal || !strings.Contains(r.Error, `no image named "missing-`+f.Suffix+`"`) {
		t.Errorf("resolve of a missing image: %+v", r)
	}
	if r := run("r3", inputs(f.Image, 2), step.CheckQuota, cloud); r.Outcome != events.Succeeded {
		t.Errorf("check-quota: %+v", r)
	}
	if r := run("r4", inputs(f.Image, 50), step.CheckQuota, cloud); r.Outcome != events.Failed || !r.Terminal || !strings.Contains(r.Error, "instances: need 50") {
		t.Errorf("check-quota over quota: %+v", r)
	}
	key := step.Target{Kind: step.Keypair, Name: "capi-key-" + f.Suffix}
	r = run("r5", inputs(f.Image, 2), step.EnsureKeypair, key)
	if r.Outcome != events.Succeeded || len(r.Created) != 1 || r.Created[0].Name != key.Name {
		t.Errorf("first ensure-keypair: %+v", r)
	}
	if r := run("r6", inputs(f.Image, 2), step.EnsureKeypair, key); r.Outcome != events.Succeeded || len(r.Created) != 0 {
		t.Errorf("second ensure-keypair: %+v", r)
	}

	// Clean-up removes the server ferry tagged for the plan, and the
	// keypair it recorded; the cluster's servers stay.
	c, err := openstack.Connect(ctx, f.Creds)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateServer(ctx, openstack.ServerSpec{Name: "vpn-" + f.Suffix, FlavorID: f.FlavorID, ImageID: f.ImageID, NetworkID: f.NetworkID, Plan: planName}); err != nil {
		t.Fatal(err)
	}
	in := inputs(f.Image, 2)
	del := step.Step{Key: "cleanup/delete", Phase: "cleanup", Executor: step.OpenStack, Action: step.Delete,
		Target: step.Target{Kind: step.TaggedResources, Name: "ferry-plan=" + planName}, Params: map[string]string{"recorded": "keypair/" + key.Name}, Inputs: &in}
	ev := events.NewStepEvent(planName, "r7", del, time.Now())
	rep, err := exec.Execute(ctx, ev)
	if err != nil || !strings.Contains(rep.Message, "server/vpn-"+f.Suffix) || !strings.Contains(rep.Message, "keypair/"+key.Name) {
		t.Errorf("clean-up: %+v, %v", rep, err)
	}
	if left, err := c.Tagged(ctx, planName); err != nil || len(left) != 0 {
		t.Errorf("tagged after clean-up: %v, %v", left, err)
	}
	byName, err := c.Servers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name := range f.Servers {
		if _, ok := byName[name]; !ok {
			t.Errorf("cluster server %s was deleted", name)
		}
	}
}
