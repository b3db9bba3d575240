package kube_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/controlplane/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// changeAfter is how long after the wait begins a test's stand-in
// controller changes the status: long enough that the wait is already
// watching, so that only its watch can see the change.
const changeAfter = 700 * time.Millisecond

// TestKubeWait: a wait ends when the watched status says so, even when the
// status changes only during the wait, and times out with a retryable
// error that says what it waited for and what it saw last.
func TestKubeWait(t *testing.T) {
	k := testenv.StartKube(t)
	e := newExecutor(t, k)
	c := k.Client
	ctx := context.Background()

	osc := func(name string) client.Object {
		return &infrav1.OpenStackCluster{ObjectMeta: testMeta(name),
			Spec: infrav1.OpenStackClusterSpec{IdentityRef: infrav1.OpenStackIdentityReference{Name: "cloud-config", CloudName: "openstack"}}}
	}
	adoptedMachine := testMachine("adopted-cp", observed.AnnotationAdopted, cluster)
	adoptedMachine.Labels = map[string]string{clusterv1.ClusterNameLabel: cluster, clusterv1.MachineControlPlaneLabel: ""}

	for _, tc := range []struct {
		name    string
		objs    []client.Object // created first; the first is the target
		params  map[string]string
		change  func(ctx context.Context, c client.Client, target client.Object) error // run changeAfter into the wait
		wantErr []string                                                               // in a retryable error; none: success
	}{{
		name:    "OpenStackCluster never ready: retryable, saying what it saw",
		objs:    []client.Object{osc("never-ready")},
		params:  map[string]string{"for": "status.ready", "timeout": "1s"},
		wantErr: []string{"wait for OpenStackCluster default/never-ready: status.ready not reached within 1s", "last seen: status.ready false"},
	}, {
		name:   "OpenStackCluster ready during the wait",
		objs:   []client.Object{osc("becomes-ready")},
		params: map[string]string{"for": "status.ready", "timeout": "1m"},
		change: func(ctx context.Context, c client.Client, obj client.Object) error {
			return capoStandIn(ctx, c, client.ObjectKeyFromObject(obj))
		},
	}, {
		name:    "MachineDeployment never stable: the replica counts in the error",
		objs:    []client.Object{withReplicas(testMD("unstable", cluster), 2)},
		params:  map[string]string{"for": "replicas == ready == updated", "timeout": "1s"},
		wantErr: []string{"replicas == ready == updated not reached within 1s", "last seen: replicas 2 (status 0), ready 0, updated 0, unavailable 0"},
	}, {
		name:   "KubeadmControlPlane stable during the wait",
		objs:   []client.Object{testKCP("becomes-stable", 3)},
		params: map[string]string{"for": "replicas == ready == updated, none unavailable", "timeout": "1m"},
		change: func(ctx context.Context, c client.Client, obj client.Object) error {
			return capiStandIn(ctx, c, "KubeadmControlPlane", client.ObjectKeyFromObject(obj))
		},
	}, {
		name:   "rollout: stable, but an adopted machine is left until it is deleted during the wait",
		objs:   []client.Object{testKCP("rolling", 1), adoptedMachine},
		params: map[string]string{"for": "no adopted machine left, replicas == ready == updated", "timeout": "1m"},
		change: func(ctx context.Context, c client.Client, obj client.Object) error {
			if err := capiStandIn(ctx, c, "KubeadmControlPlane", client.ObjectKeyFromObject(obj)); err != nil {
				return err
			}
			return c.Delete(ctx, adoptedMachine)
		},
	}, {
		name:   "KamajiControlPlane ready during the wait",
		objs:   []client.Object{testKamaji("kamaji-ready")},
		params: map[string]string{"for": "status.ready", "timeout": "1m"},
		change: func(ctx context.Context, c client.Client, obj client.Object) error {
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				u := fresh(obj).(*unstructured.Unstructured)
				if err := c.Get(ctx, client.ObjectKeyFromObject(obj), u); err != nil {
					return err
				}
				// Kamaji's status has more required fields than ready.
				u.Object["status"] = map[string]any{"ready": true, "initialized": true, "replicas": int64(1), "readyReplicas": int64(1),
					"updatedReplicas": int64(1), "unavailableReplicas": int64(0), "selector": "kamaji", "version": "1.28.10"}
				return c.Status().Update(ctx, u)
			})
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			mustCreate(t, c, tc.objs...)
			target := tc.objs[0]
			ev := event(step.Wait, kindOf(t, k, target), target.GetName(), tc.params)
			changed := make(chan error, 1)
			waitCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			if tc.change != nil {
				go func() {
					time.Sleep(changeAfter)
					err := tc.change(ctx, c, target)
					if err != nil {
						cancel() // the wait cannot succeed any more
					}
					changed <- err
				}()
			}
			start := time.Now()
			rep, err := e.Execute(waitCtx, ev)
			took := time.Since(start)
			if tc.change != nil {
				if cerr := <-changed; cerr != nil {
					t.Fatalf("stand-in: %v", cerr)
				}
			}
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("wait: %v", err)
				}
				if took < changeAfter {
					t.Errorf("wait ended after %s, before the status changed (%s)", took, changeAfter)
				}
				t.Logf("report: %s (after %s)", rep.Message, took.Round(time.Millisecond))
				// Done is done: a redelivery ends at once.
				if _, err := e.Execute(ctx, ev); err != nil {
					t.Errorf("second run: %v", err)
				}
				return
			}
			if err == nil || failure.IsTerminal(err) {
				t.Fatalf("wait: error %v (terminal %t); want a retryable error", err, failure.IsTerminal(err))
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}

	for _, tc := range []struct{ name, kind, forText, timeout, wantErr string }{
		{"a clause the executor does not know", "OpenStackCluster", "status.ready, the moon is full", "1m", `cannot wait for "the moon is full" on a OpenStackCluster`},
		{"a clause of another kind", "OpenStackCluster", "replicas == ready == updated", "1m", "cannot wait for"},
		{"a timeout that is no duration", "MachineDeployment", "replicas == ready == updated", "soon", `timeout parameter "soon" is not a positive duration`},
	} {
		t.Run("terminal: "+tc.name, func(t *testing.T) {
			ev := event(step.Wait, tc.kind, "any", map[string]string{"for": tc.forText, "timeout": tc.timeout})
			run(t, e, ev, tc.wantErr)
		})
	}
}

func withReplicas(md *clusterv1.MachineDeployment, n int32) *clusterv1.MachineDeployment {
	md.Spec.Replicas = &n
	return md
}

// capoStandIn is a STAND-IN for CAPO's OpenStackCluster controller in the
// wait's unit test: it writes the status CAPO reports once the cluster's
// network, security groups and endpoint exist, at a moment the test picks.
// The real controller meets the wait in TestAdoptOpenStack.
func capoStandIn(ctx context.Context, c client.Client, key client.ObjectKey) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var osc infrav1.OpenStackCluster
		if err := c.Get(ctx, key, &osc); err != nil {
			return err
		}
		osc.Status.Ready = true
		return c.Status().Update(ctx, &osc)
	})
}

// capiStandIn stands in for CAPI's KubeadmControlPlane and
// MachineDeployment controllers once they have taken over the adopted
// machines: every replica ready and up to date, the spec observed.
func capiStandIn(ctx context.Context, c client.Client, kind string, key client.ObjectKey) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		switch kind {
		case "KubeadmControlPlane":
			var kcp controlplanev1.KubeadmControlPlane
			if err := c.Get(ctx, key, &kcp); err != nil {
				return err
			}
			n := *kcp.Spec.Replicas
			kcp.Status.Replicas, kcp.Status.ReadyReplicas, kcp.Status.UpdatedReplicas, kcp.Status.UnavailableReplicas = n, n, n, 0
			kcp.Status.ObservedGeneration, kcp.Status.Ready, kcp.Status.Initialized = kcp.Generation, true, true
			return c.Status().Update(ctx, &kcp)
		default:
			var md clusterv1.MachineDeployment
			if err := c.Get(ctx, key, &md); err != nil {
				return err
			}
			n := *md.Spec.Replicas
			md.Status.Replicas, md.Status.ReadyReplicas, md.Status.UpdatedReplicas, md.Status.AvailableReplicas, md.Status.UnavailableReplicas = n, n, n, n, 0
			md.Status.ObservedGeneration = md.Generation
			return c.Status().Update(ctx, &md)
		}
	})
}
