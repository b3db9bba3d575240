package kube

import (
	"fmt"

	kubeclient "github.com/ferry-dev/ferry/internal/kube"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	infrav1alpha1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1alpha1"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/bootstrap/kubeadm/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/controlplane/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
)

// groupVersions maps each kind a reference parameter may name to its
// API version. The versions are those of ferry's scheme (internal/kube).
var groupVersions = map[string]schema.GroupVersion{
	step.Cluster:                  clusterv1.GroupVersion,
	step.Machine:                  clusterv1.GroupVersion,
	step.MachineSet:               clusterv1.GroupVersion,
	step.MachineDeployment:        clusterv1.GroupVersion,
	step.KubeadmConfig:            bootstrapv1.GroupVersion,
	step.KubeadmConfigTemplate:    bootstrapv1.GroupVersion,
	step.KubeadmControlPlane:      controlplanev1.GroupVersion,
	step.KamajiControlPlane:       kubeclient.KamajiGVK.GroupVersion(),
	step.OpenStackCluster:         infrav1.SchemeGroupVersion,
	step.OpenStackMachine:         infrav1.SchemeGroupVersion,
	step.OpenStackMachineTemplate: infrav1.SchemeGroupVersion,
	step.OpenStackServer:          infrav1alpha1.SchemeGroupVersion,
}

// newObject returns an empty object of a kind the executor reads and
// patches, or nil.
func newObject(kind string) client.Object {
	switch kind {
	case step.Cluster:
		return &clusterv1.Cluster{}
	case step.Machine:
		return &clusterv1.Machine{}
	case step.MachineSet:
		return &clusterv1.MachineSet{}
	case step.MachineDeployment:
		return &clusterv1.MachineDeployment{}
	case step.KubeadmControlPlane:
		return &controlplanev1.KubeadmControlPlane{}
	case step.OpenStackCluster:
		return &infrav1.OpenStackCluster{}
	case step.OpenStackServer:
		return &infrav1alpha1.OpenStackServer{}
	case step.KamajiControlPlane:
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(kubeclient.KamajiGVK)
		return u
	}
	return nil
}

// ref parses a reference parameter, "Kind/name", into an object
// reference in namespace (CAPI's references are namespace-local). The
// namespace is always written: CAPI's controllers look a reference up in
// the namespace it names, and only its webhooks fill in an empty one.
// A malformed one or an unknown kind is a defect of the step: terminal.
func ref(param, value, namespace string) (*corev1.ObjectReference, error) {
	r, err := step.ParseRef(param, value)
	if err != nil {
		return nil, err
	}
	kind, name := r.Kind, r.Name
	gv, known := groupVersions[kind]
	if !known {
		return nil, failure.Terminal(fmt.Errorf("parameter %s=%q: kind %s is not one ferry references", param, value, kind))
	}
	return &corev1.ObjectReference{APIVersion: gv.String(), Kind: kind, Name: name, Namespace: namespace}, nil
}

// sameRef reports whether a reference already points at want: same
// kind, name and API group (the version may differ after a CRD upgrade).
func sameRef(have *corev1.ObjectReference, want *corev1.ObjectReference) bool {
	if have == nil {
		return false
	}
	return have.Kind == want.Kind && have.Name == want.Name &&
		have.GroupVersionKind().Group == want.GroupVersionKind().Group
}

// meta is the metadata every object ferry creates gets: CAPI's
// cluster-name label, which clusterctl move and CAPI's controllers select
// by, and ferry's pause annotations when the step asks for a pause.
func meta(obj client.Object, s *job, paused bool) {
	obj.SetNamespace(s.key.Namespace)
	obj.SetName(s.key.Name)
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[clusterv1.ClusterNameLabel] = s.cluster()
	// What a rollback of the phase removes (and only that).
	labels[observed.LabelCreatedBy] = s.ev.Plan
	labels[observed.LabelPhase] = s.ev.Step.Phase
	obj.SetLabels(labels)
	if paused {
		setPause(obj, s.ev.Plan)
	}
}
