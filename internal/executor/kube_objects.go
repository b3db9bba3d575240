package executor

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/bootstrap/kubeadm/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/controlplane/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/observer"
)

// The kinds kube steps act on, as the planner names them.
const (
	kubeKindSecret  = "Secret"
	kubeKindCluster = "Cluster"
	kubeKindOSC     = "OpenStackCluster"
	kubeKindOSM     = "OpenStackMachine"
	kubeKindOSMT    = "OpenStackMachineTemplate"
	kubeKindKCP     = v1alpha1.ProviderKubeadm
	kubeKindKamaji  = v1alpha1.ProviderKamaji
	kubeKindKC      = "KubeadmConfig"
	kubeKindKCT     = "KubeadmConfigTemplate"
	kubeKindMachine = "Machine"
	kubeKindMS      = "MachineSet"
	kubeKindMD      = "MachineDeployment"
)

// kubeGroupVersions maps each kind a reference parameter may name to its
// API version. The versions are those of ferry's scheme (internal/kube).
var kubeGroupVersions = map[string]schema.GroupVersion{
	kubeKindCluster: clusterv1.GroupVersion,
	kubeKindMachine: clusterv1.GroupVersion,
	kubeKindMS:      clusterv1.GroupVersion,
	kubeKindMD:      clusterv1.GroupVersion,
	kubeKindKC:      bootstrapv1.GroupVersion,
	kubeKindKCT:     bootstrapv1.GroupVersion,
	kubeKindKCP:     controlplanev1.GroupVersion,
	kubeKindKamaji:  observer.KamajiGVK.GroupVersion(),
	kubeKindOSC:     infrav1.SchemeGroupVersion,
	kubeKindOSM:     infrav1.SchemeGroupVersion,
	kubeKindOSMT:    infrav1.SchemeGroupVersion,
}

// kubeNewObject returns an empty object of a kind the executor reads and
// patches, or nil.
func kubeNewObject(kind string) client.Object {
	switch kind {
	case kubeKindCluster:
		return &clusterv1.Cluster{}
	case kubeKindMachine:
		return &clusterv1.Machine{}
	case kubeKindMS:
		return &clusterv1.MachineSet{}
	case kubeKindMD:
		return &clusterv1.MachineDeployment{}
	case kubeKindKCP:
		return &controlplanev1.KubeadmControlPlane{}
	case kubeKindOSC:
		return &infrav1.OpenStackCluster{}
	case kubeKindKamaji:
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(observer.KamajiGVK)
		return u
	}
	return nil
}

// kubeRef parses a reference parameter, "Kind/name", into an object
// reference in namespace (CAPI's references are namespace-local). The
// namespace is always written: CAPI's controllers look a reference up in
// the namespace it names, and only its webhooks fill in an empty one.
// A malformed one or an unknown kind is a defect of the step: terminal.
func kubeRef(param, value, namespace string) (*corev1.ObjectReference, error) {
	kind, name, ok := kubeSplitPair(value, "/")
	if !ok {
		return nil, failure.Terminal(fmt.Errorf("parameter %s=%q is not Kind/name", param, value))
	}
	gv, known := kubeGroupVersions[kind]
	if !known {
		return nil, failure.Terminal(fmt.Errorf("parameter %s=%q: kind %s is not one ferry references", param, value, kind))
	}
	return &corev1.ObjectReference{APIVersion: gv.String(), Kind: kind, Name: name, Namespace: namespace}, nil
}

// kubeSameRef reports whether a reference already points at want: same
// kind, name and API group (the version may differ after a CRD upgrade).
func kubeSameRef(have *corev1.ObjectReference, want *corev1.ObjectReference) bool {
	if have == nil {
		return false
	}
	return have.Kind == want.Kind && have.Name == want.Name &&
		have.GroupVersionKind().Group == want.GroupVersionKind().Group
}

// kubeMeta is the metadata every object ferry creates gets: CAPI's
// cluster-name label, which clusterctl move and CAPI's controllers select
// by, and ferry's pause annotations when the step asks for a pause.
func kubeMeta(obj client.Object, s *kubeStep, paused bool) {
	obj.SetNamespace(s.key.Namespace)
	obj.SetName(s.key.Name)
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[clusterv1.ClusterNameLabel] = s.cluster()
	obj.SetLabels(labels)
	if paused {
		kubeSetPause(obj, s.ev.Plan)
	}
}

// kubeFlagTrue reads a boolean parameter; only "true" is true.
func kubeFlagTrue(s *kubeStep, name string) bool { return s.param(name) == "true" }

// kubeParseMap reads "k=v,k2=v2" into a map; empty gives nil.
func kubeParseMap(param, value string) (map[string]string, error) {
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	m := map[string]string{}
	for _, part := range strings.Split(value, ",") {
		k, v, ok := kubeSplitPair(part, "=")
		if !ok {
			return nil, failure.Terminal(fmt.Errorf("parameter %s=%q: %q is not key=value", param, value, part))
		}
		m[k] = v
	}
	return m, nil
}
