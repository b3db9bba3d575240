package kube

import (
	"fmt"
	"sync"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	infrav1alpha1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1alpha1"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/bootstrap/kubeadm/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/controlplane/kubeadm/api/v1beta1"
)

// Scheme returns the scheme with every API group ferry works with
// registered. It is built once and shared by every client and cache (a
// scheme is read-only once built; each copy costs about 150 KB, which a
// client per workload cluster multiplies): do not register more types in it.
var Scheme = sync.OnceValue(newScheme)

// newScheme builds the scheme. It panics only if the vendored API packages
// conflict with each other, which is a build defect rather than a runtime
// condition.
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		clusterv1.AddToScheme,
		bootstrapv1.AddToScheme,
		controlplanev1.AddToScheme,
		infrav1.AddToScheme,
		infrav1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("kube: build scheme: %v", err))
		}
	}
	return s
}

// KamajiGVK is the KamajiControlPlane kind, read as unstructured data: its
// provider's Go module is not a dependency of ferry.
var KamajiGVK = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1alpha1", Kind: v1alpha1.ProviderKamaji}
