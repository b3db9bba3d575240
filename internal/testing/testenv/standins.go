package testenv

import (
	"context"
	"fmt"

	"time"

	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/controlplane/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StartControllerStandIns runs STAND-INS for the CAPI and CAPO controllers
// against an API server until the test ends. No real controller runs in the
// test environment; these only move status the way the controllers would
// once they reconciled, and nothing else:
//
//   - an OpenStackCluster that is not paused becomes ready;
//   - a KubeadmControlPlane or MachineDeployment that is not paused reports
//     every replica ready, updated and available, at its current generation;
//   - a KamajiControlPlane becomes ready.
//
// They poll every interval (200ms when zero), which is fine for a stand-in
// and wrong for a controller. Each change they make is logged through
// t.Logf, marked as a stand-in's.
func StartControllerStandIns(t T, k *Kube, interval time.Duration) {
	t.Helper()
	if interval == 0 {
		interval = 200 * time.Millisecond
	}
	Poll(t, interval, func(ctx context.Context) { standInPass(ctx, k.Client, t.Logf) })
}

// Poll runs pass now and then every interval until the test ends; the
// stand-ins run on it. pass gets a context that ends with the test.
func Poll(t T, interval time.Duration, pass func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			pass(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(interval):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func paused(obj client.Object) bool {
	_, ok := obj.GetAnnotations()[clusterv1.PausedAnnotation]
	return ok
}

// standInPass moves every object's status once. Errors are ignored: the
// next pass tries again, as a controller's requeue would.
func standInPass(ctx context.Context, c client.Client, logf func(format string, args ...any)) {
	moved := func(who, kind string, obj client.Object, what string) {
		logf("stand-in %s controller (not the real one): %s %s/%s %s", who, kind, obj.GetNamespace(), obj.GetName(), what)
	}
	standInOpenStackClusters(ctx, c, moved)
	standInKubeadmControlPlanes(ctx, c, moved)
	standInMachineDeployments(ctx, c, moved)
	standInKamajiControlPlanes(ctx, c, moved)
}

// movedFunc logs a change a stand-in made: who stands in, the object and
// what it now reports.
type movedFunc func(who, kind string, obj client.Object, what string)

// standInOpenStackClusters makes every OpenStackCluster that is not paused
// ready, as CAPO would.
func standInOpenStackClusters(ctx context.Context, c client.Client, moved movedFunc) {
	var oscs infrav1.OpenStackClusterList
	if c.List(ctx, &oscs) == nil {
		for i := range oscs.Items {
			o := &oscs.Items[i]
			if !o.Status.Ready && !paused(o) {
				o.Status.Ready = true
				if c.Status().Update(ctx, o) == nil {
					moved("CAPO", "OpenStackCluster", o, "is ready")
				}
			}
		}
	}
}

// standInKubeadmControlPlanes makes every KubeadmControlPlane that is not
// paused report its replicas ready and updated at its generation.
func standInKubeadmControlPlanes(ctx context.Context, c client.Client, moved movedFunc) {
	var kcps controlplanev1.KubeadmControlPlaneList
	if c.List(ctx, &kcps) == nil {
		for i := range kcps.Items {
			k := &kcps.Items[i]
			if paused(k) || k.Spec.Replicas == nil {
				continue
			}
			n := *k.Spec.Replicas
			if k.Status.Replicas != n || k.Status.ReadyReplicas != n || k.Status.UpdatedReplicas != n || k.Status.UnavailableReplicas != 0 || !k.Status.Ready ||
				k.Status.ObservedGeneration != k.Generation {
				k.Status.Replicas, k.Status.ReadyReplicas, k.Status.UpdatedReplicas, k.Status.UnavailableReplicas = n, n, n, 0
				k.Status.ObservedGeneration = k.Generation
				k.Status.Ready, k.Status.Initialized = true, true
				if c.Status().Update(ctx, k) == nil {
					moved("CAPI", "KubeadmControlPlane", k, fmt.Sprintf("reports %d of %d replicas ready", n, n))
				}
			}
		}
	}
}

// standInMachineDeployments makes every MachineDeployment that is not
// paused report its replicas ready, updated and available at its
// generation.
func standInMachineDeployments(ctx context.Context, c client.Client, moved movedFunc) {
	var mds clusterv1.MachineDeploymentList
	if c.List(ctx, &mds) == nil {
		for i := range mds.Items {
			d := &mds.Items[i]
			if paused(d) || d.Spec.Paused || d.Spec.Replicas == nil {
				continue
			}
			n := *d.Spec.Replicas
			if d.Status.Replicas != n || d.Status.ReadyReplicas != n || d.Status.UpdatedReplicas != n || d.Status.AvailableReplicas != n || d.Status.UnavailableReplicas != 0 ||
				d.Status.ObservedGeneration != d.Generation {
				d.Status.Replicas, d.Status.ReadyReplicas, d.Status.UpdatedReplicas, d.Status.AvailableReplicas, d.Status.UnavailableReplicas = n, n, n, n, 0
				d.Status.ObservedGeneration = d.Generation
				if c.Status().Update(ctx, d) == nil {
					moved("CAPI", "MachineDeployment", d, fmt.Sprintf("reports %d of %d replicas available", n, n))
				}
			}
		}
	}
}
