package testenv

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kamajiListGVK is the KamajiControlPlane's list kind.
var kamajiListGVK = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1alpha1", Kind: "KamajiControlPlaneList"}

// StartKamajiStandIn runs a STAND-IN for the KamajiControlPlane provider's
// controller against k until the test ends. Its Go module is not served
// here, so it cannot be built: this is the one controller the scenarios
// do not run for real. It does only what the provider's status contract
// promises Cluster API once the hosted control plane answers: a
// KamajiControlPlane that is not paused reports ready and initialized, an
// externally managed control plane (no Machines), its replicas ready at
// its spec's version. The hosted API server itself is the test's workload
// API server; its Secrets (CA, kubeconfig) are the fixture's, as Kamaji
// would have written them.
//
// Every change it makes is logged through t.Logf, marked as a stand-in's.
func StartKamajiStandIn(t T, k *Kube) {
	t.Helper()
	Poll(t, 500*time.Millisecond, func(ctx context.Context) {
		standInKamajiControlPlanes(ctx, k.Client, func(who, kind string, obj client.Object, what string) {
			t.Logf("stand-in %s controller (not the real one): %s %s/%s %s", who, kind, obj.GetNamespace(), obj.GetName(), what)
		})
	})
}

// standInKamajiControlPlanes moves the status of every KamajiControlPlane
// that is not paused as the provider would once its hosted control plane
// answers.
func standInKamajiControlPlanes(ctx context.Context, c client.Client, moved movedFunc) {
	kamaji := &unstructured.UnstructuredList{}
	kamaji.SetGroupVersionKind(kamajiListGVK)
	if c.List(ctx, kamaji) != nil {
		return
	}
	for i := range kamaji.Items {
		u := &kamaji.Items[i]
		if paused(u) {
			continue
		}
		replicas, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
		if !found {
			replicas = 2 // the CRD's default
		}
		version, _, _ := unstructured.NestedString(u.Object, "spec", "version")
		want := map[string]any{
			"ready": true, "initialized": true, "externalManagedControlPlane": true,
			"replicas": replicas, "readyReplicas": replicas, "updatedReplicas": replicas, "unavailableReplicas": int64(0),
			"version": version, "selector": "kamaji.clastix.io/name=" + u.GetName(),
		}
		changed := false
		for field, v := range want {
			if got, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status", field); fmt.Sprint(got) != fmt.Sprint(v) {
				_ = unstructured.SetNestedField(u.Object, v, "status", field)
				changed = true
			}
		}
		if !changed {
			continue
		}
		if err := c.Status().Update(ctx, u); err != nil {
			moved("Kamaji", "KamajiControlPlane", u, "could not be updated: "+err.Error())
			continue
		}
		moved("Kamaji", "KamajiControlPlane", u, fmt.Sprintf("is ready and initialized, %d replicas at %s", replicas, version))
	}
}
