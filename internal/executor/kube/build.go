package kube

import (
	"context"
	"fmt"
	"maps"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/bootstrap/kubeadm/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/controlplane/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
)

// The machines' objects. The adopted ones (KubeadmConfig, Machine,
// OpenStackMachine) describe nodes that already run; the templates
// (OpenStackMachineTemplate, KubeadmConfigTemplate) and the owners
// (KubeadmControlPlane, MachineDeployment, MachineSet) describe the
// machines CAPI builds later, and agree with the adopted ones so that CAPI
// finds them up to date and replaces nothing on its own.

// adoptedTemplateHash is the machine-template-hash label of the
// MachineSet that owns a pool's adopted Machines, and of those Machines.
// The MachineDeployment controller reads the label from every MachineSet
// it owns (it fails without one) and puts it into the set's selector; a
// Machine without it would no longer be the set's, and the set would
// create new machines in its place. Its value is any label value: CAPI
// only compares it.
const adoptedTemplateHash = "adopted"

// buildKubeadmConfig: the bootstrap config of a running control-plane node.
func (e *Executor) buildKubeadmConfig(ctx context.Context, s *job) (client.Object, error) {
	cc, err := e.requireKubeadm(ctx, s)
	if err != nil {
		return nil, err
	}
	kc := &bootstrapv1.KubeadmConfig{Spec: controlPlaneSpec(cc, false)}
	meta(kc, s, false)
	return kc, nil
}

// buildKubeadmControlPlane: the control plane with the running kubeadm
// spec and version, so that nothing rolls when it is unpaused.
func (e *Executor) buildKubeadmControlPlane(ctx context.Context, s *job) (client.Object, error) {
	replicas, err := replicas(s)
	if err != nil {
		return nil, err
	}
	version, err := required(s, step.ParamVersion)
	if err != nil {
		return nil, err
	}
	infra, err := refParam(s, step.ParamMachineTemplateInfraRef)
	if err != nil {
		return nil, err
	}
	cc, err := e.requireKubeadm(ctx, s)
	if err != nil {
		return nil, err
	}
	kcp := &controlplanev1.KubeadmControlPlane{Spec: controlplanev1.KubeadmControlPlaneSpec{
		Replicas:          replicas,
		Version:           version,
		MachineTemplate:   controlplanev1.KubeadmControlPlaneMachineTemplate{InfrastructureRef: *infra},
		KubeadmConfigSpec: controlPlaneSpec(cc, true),
		// CAPI's default, written out rather than left to its webhook.
		RolloutStrategy: &controlplanev1.RolloutStrategy{
			Type:          controlplanev1.RollingUpdateStrategyType,
			RollingUpdate: &controlplanev1.RollingUpdate{MaxSurge: ptr.To(intstr.FromInt32(1))},
		},
	}}
	meta(kcp, s, s.params().Flag(step.ParamPaused))
	return kcp, nil
}

// providerID reads the providerID parameter. Anything but an OpenStack
// server's ID means the planner could not find the node's server in Nova
// (or did not ask): a person must see to it, and a Machine without its
// server must not exist.
func providerID(s *job) (string, error) {
	id := s.params().Get(step.ParamProviderID)
	if !strings.HasPrefix(id, step.ProviderIDPrefix) || len(id) == len(step.ProviderIDPrefix) {
		return "", failure.Terminal(fmt.Errorf("create %s: providerID %q is not %s<server-id>: the Nova server of node %s was not found; "+
			"ferry adopts a node only with its server (check that a server named after the node exists and OpenStack is reachable)",
			s.target(), id, step.ProviderIDPrefix, s.key.Name))
	}
	return id, nil
}

// buildMachine: the Machine of a running node. Its bootstrap names a data
// Secret so that CAPI does not wait for bootstrap data of a node that has
// long joined; the Secret is not created, since nothing reads it for a
// server that exists (CAPO finds the server by name).
func (e *Executor) buildMachine(ctx context.Context, s *job) (client.Object, error) {
	providerID, err := providerID(s)
	if err != nil {
		return nil, err
	}
	infra, err := refParam(s, step.ParamInfrastructureRef)
	if err != nil {
		return nil, err
	}
	m := &clusterv1.Machine{Spec: clusterv1.MachineSpec{
		ClusterName:       s.cluster(),
		InfrastructureRef: *infra,
		ProviderID:        ptr.To(providerID),
		Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To(s.key.Name)},
	}}
	if v := s.params().Get(step.ParamBootstrap); v != "" {
		if m.Spec.Bootstrap.ConfigRef, err = ref(step.ParamBootstrap, v, s.key.Namespace); err != nil {
			return nil, err
		}
	}
	if v := s.params().Get(step.ParamVersion); v != "" {
		m.Spec.Version = ptr.To(v)
	}
	meta(m, s, s.params().Flag(step.ParamPaused))
	// The labels CAPI's owners select their machines by: KubeadmControlPlane
	// adopts control-plane machines of its cluster, a MachineSet those of
	// its selector.
	if s.params().Flag(step.ParamControlPlane) {
		cp := s.inputs().ControlPlane.Name
		if cp == "" {
			return nil, failure.Terminal(fmt.Errorf("create %s: a control-plane Machine, but the step's inputs name no control plane", s.target()))
		}
		m.Labels[clusterv1.MachineControlPlaneLabel] = ""
		m.Labels[clusterv1.MachineControlPlaneNameLabel] = cp
	}
	if v := s.params().Get(step.ParamDeployment); v != "" {
		m.Labels[clusterv1.MachineDeploymentNameLabel] = v
	}
	if v := s.params().Get(step.ParamMachineSet); v != "" {
		m.Labels[clusterv1.MachineSetNameLabel] = v
		m.Labels[clusterv1.MachineDeploymentUniqueLabel] = adoptedTemplateHash
	}
	ann := m.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[observed.AnnotationAdopted] = s.ev.Plan
	m.SetAnnotations(ann)
	return m, nil
}

// identity reads the identityRef parameter, "secret#cloud", which the
// planner gives every step that builds a CAPO object.
func identity(s *job) (*infrav1.OpenStackIdentityReference, error) {
	name, cloud, ok, err := s.params().IdentityRef()
	switch {
	case err != nil:
		return nil, s.paramError(err)
	case !ok:
		return nil, s.paramError(failure.Terminal(fmt.Errorf("the step has no %s parameter", step.ParamIdentityRef)))
	}
	return &infrav1.OpenStackIdentityReference{Name: name, CloudName: cloud}, nil
}

// machineSpec is the part of a CAPO machine spec every machine of a
// pool shares: flavor, image by name, and the identity to build it with.
func machineSpec(s *job) (infrav1.OpenStackMachineSpec, error) {
	flavor, err := required(s, step.ParamFlavor)
	if err != nil {
		return infrav1.OpenStackMachineSpec{}, err
	}
	image, err := required(s, step.ParamImage)
	if err != nil {
		return infrav1.OpenStackMachineSpec{}, err
	}
	id, err := identity(s)
	if err != nil {
		return infrav1.OpenStackMachineSpec{}, err
	}
	return infrav1.OpenStackMachineSpec{
		Flavor:      ptr.To(flavor),
		Image:       infrav1.ImageParam{Filter: &infrav1.ImageFilter{Name: ptr.To(image)}},
		IdentityRef: id,
	}, nil
}

// buildOpenStackMachineTemplate: how CAPO builds new machines of the
// control plane or a pool, with the SSH key and a port on the plan's
// network.
func (e *Executor) buildOpenStackMachineTemplate(_ context.Context, s *job) (client.Object, error) {
	spec, err := machineSpec(s)
	if err != nil {
		return nil, err
	}
	spec.SSHKeyName = s.params().Get(step.ParamSSHKeyName)
	byID, network, err := s.params().NetworkPort()
	if err != nil {
		return nil, s.paramError(err)
	}
	spec.Ports = []infrav1.PortOpts{{Network: networkParam(byID, network)}}
	t := &infrav1.OpenStackMachineTemplate{Spec: infrav1.OpenStackMachineTemplateSpec{
		Template: infrav1.OpenStackMachineTemplateResource{Spec: spec},
	}}
	meta(t, s, false)
	return t, nil
}

// buildOpenStackMachine: a running node's server, bound by providerID.
func (e *Executor) buildOpenStackMachine(_ context.Context, s *job) (client.Object, error) {
	providerID, err := providerID(s)
	if err != nil {
		return nil, err
	}
	spec, err := machineSpec(s)
	if err != nil {
		return nil, err
	}
	spec.ProviderID = ptr.To(providerID)
	m := &infrav1.OpenStackMachine{Spec: spec}
	meta(m, s, false)
	return m, nil
}

// buildKubeadmConfigTemplate: how new workers join. kubeadm keeps no join
// configuration in kube-system/kubeadm-config (only the cluster's), so the
// template registers nodes as CAPO's own templates do, with the kubelet
// flags of the step (cloud-provider=external).
func (e *Executor) buildKubeadmConfigTemplate(_ context.Context, s *job) (client.Object, error) {
	args, err := s.params().Map(step.ParamKubeletExtraArgs)
	if err != nil {
		return nil, s.paramError(err)
	}
	t := &bootstrapv1.KubeadmConfigTemplate{Spec: bootstrapv1.KubeadmConfigTemplateSpec{
		Template: bootstrapv1.KubeadmConfigTemplateResource{Spec: bootstrapv1.KubeadmConfigSpec{
			JoinConfiguration: &bootstrapv1.JoinConfiguration{NodeRegistration: nodeRegistration(args)},
		}},
	}}
	meta(t, s, false)
	return t, nil
}

// buildMachineDeployment: a worker pool. Its selector is the cluster and
// the pool's name, the labels every Machine of the pool carries. The
// strategy is CAPI's default, written out: the controller fails on a
// MachineDeployment without one, and only CAPI's webhook would fill it.
func (e *Executor) buildMachineDeployment(ctx context.Context, s *job) (client.Object, error) {
	replicas, err := replicas(s)
	if err != nil {
		return nil, err
	}
	bootstrap, err := refParam(s, step.ParamBootstrap)
	if err != nil {
		return nil, err
	}
	infra, err := refParam(s, step.ParamInfrastructureRef)
	if err != nil {
		return nil, err
	}
	version, err := e.version(ctx, s)
	if err != nil {
		return nil, err
	}
	selected := map[string]string{clusterv1.ClusterNameLabel: s.cluster(), clusterv1.MachineDeploymentNameLabel: s.key.Name}
	md := &clusterv1.MachineDeployment{Spec: clusterv1.MachineDeploymentSpec{
		ClusterName: s.cluster(),
		Replicas:    replicas,
		Selector:    metav1.LabelSelector{MatchLabels: selected},
		Strategy: &clusterv1.MachineDeploymentStrategy{
			Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
			RollingUpdate: &clusterv1.MachineRollingUpdateDeployment{
				MaxSurge:       ptr.To(intstr.FromInt32(1)),
				MaxUnavailable: ptr.To(intstr.FromInt32(0)),
				DeletePolicy:   ptr.To(string(clusterv1.RandomMachineSetDeletePolicy)),
			},
		},
		MinReadySeconds: ptr.To(int32(0)),
		Template: clusterv1.MachineTemplateSpec{
			ObjectMeta: clusterv1.ObjectMeta{Labels: maps.Clone(selected)},
			Spec: clusterv1.MachineSpec{
				ClusterName:       s.cluster(),
				Bootstrap:         clusterv1.Bootstrap{ConfigRef: bootstrap},
				InfrastructureRef: *infra,
				Version:           version,
			},
		},
	}}
	if fd := s.params().Get(step.ParamFailureDomain); fd != "" {
		md.Spec.Template.Spec.FailureDomain = ptr.To(fd)
	}
	meta(md, s, s.params().Flag(step.ParamPaused))
	return md, nil
}

// version is the version parameter or, when the step has none (the
// replace strategy's new pools), the control plane's version: workers of
// another version would be an upgrade nobody asked for. nil when neither
// is known.
func (e *Executor) version(ctx context.Context, s *job) (*string, error) {
	if v := s.params().Get(step.ParamVersion); v != "" {
		return ptr.To(v), nil
	}
	cp := s.inputs().ControlPlane
	obj := newObject(cp.Kind)
	if obj == nil || cp.Name == "" {
		return nil, nil
	}
	err := e.Client.Get(ctx, client.ObjectKey{Namespace: s.key.Namespace, Name: cp.Name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("create %s: read the control plane's version: %w", s.target(), err)
	}
	v := ""
	switch o := obj.(type) {
	case *controlplanev1.KubeadmControlPlane:
		v = o.Spec.Version
	case *unstructured.Unstructured:
		v, _, _ = unstructured.NestedString(o.Object, "spec", "version")
	}
	if v == "" {
		return nil, nil
	}
	if !strings.HasPrefix(v, "v") {
		v = "v" + v // Kamaji writes 1.28.10, CAPI machines v1.28.10
	}
	return ptr.To(v), nil
}

// buildMachineSet: the set that owns a pool's adopted Machines, owned by
// its MachineDeployment and with the same machine template, so that the
// MachineDeployment finds it current and does not roll a new one. Its
// labels, selector and template labels are those the MachineDeployment
// controller would give it (the deployment's, with the template hash), so
// that the controller's own update of the set changes nothing.
func (e *Executor) buildMachineSet(ctx context.Context, s *job) (client.Object, error) {
	owner, err := refParam(s, step.ParamOwner)
	if err != nil {
		return nil, err
	}
	if owner.Kind != step.MachineDeployment {
		return nil, failure.Terminal(fmt.Errorf("create %s: owner %s/%s is not a MachineDeployment", s.target(), owner.Kind, owner.Name))
	}
	replicas, err := replicas(s)
	if err != nil {
		return nil, err
	}
	var md clusterv1.MachineDeployment
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: s.key.Namespace, Name: owner.Name}, &md); err != nil {
		// Missing: it is created a group earlier; the next attempt finds it.
		return nil, fmt.Errorf("create %s: read owner MachineDeployment %s/%s: %w", s.target(), s.key.Namespace, owner.Name, err)
	}
	selector := md.Spec.Selector.DeepCopy()
	if selector.MatchLabels == nil {
		selector.MatchLabels = map[string]string{}
	}
	selector.MatchLabels[clusterv1.MachineDeploymentUniqueLabel] = adoptedTemplateHash
	template := md.Spec.Template.DeepCopy()
	if template.Labels == nil {
		template.Labels = map[string]string{}
	}
	template.Labels[clusterv1.MachineDeploymentUniqueLabel] = adoptedTemplateHash
	if v := s.params().Get(step.ParamInfrastructureRef); v != "" {
		infra, err := ref("infrastructureRef", v, s.key.Namespace)
		if err != nil {
			return nil, err
		}
		template.Spec.InfrastructureRef = *infra
	}
	ms := &clusterv1.MachineSet{Spec: clusterv1.MachineSetSpec{
		ClusterName: s.cluster(),
		Replicas:    replicas,
		Selector:    *selector,
		Template:    *template,
	}}
	meta(ms, s, s.params().Flag(step.ParamPaused))
	maps.Copy(ms.Labels, template.Labels)
	ms.Labels[clusterv1.MachineDeploymentNameLabel] = md.Name
	ms.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(&md, clusterv1.GroupVersion.WithKind(step.MachineDeployment))}
	return ms, nil
}
