package observer

// What the management cluster holds of a plan's cluster: the CAPI and CAPO
// objects, the Secrets by key name, the control plane, and the
// OpenStackServers ferry bound.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	infrav1alpha1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1alpha1"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/bootstrap/kubeadm/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/controlplane/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/kube"
	"github.com/ferry-dev/ferry/internal/observed"
)

func pauseOf(obj client.Object) observed.Pause {
	_, paused := obj.GetAnnotations()[clusterv1.PausedAnnotation]
	_, byFerry := obj.GetAnnotations()[observed.AnnotationPausedBy]
	return observed.Pause{Paused: paused, ByFerry: paused && byFerry}
}

func refOf(kind, name string) observed.Ref { return observed.Ref{Kind: kind, Name: name} }

// ownersOf are an object's owner references, by kind and name.
func ownersOf(obj client.Object) []observed.Ref {
	var out []observed.Ref
	for _, r := range obj.GetOwnerReferences() {
		out = append(out, refOf(r.Kind, r.Name))
	}
	return out
}

func (o *Observer) cluster(ctx context.Context, ns, name string, s *observed.Snapshot) error {
	var c clusterv1.Cluster
	found, err := o.get(ctx, ns, name, &c)
	if err != nil || !found {
		return err
	}
	oc := &observed.Cluster{}
	_, byFerry := c.Annotations[observed.AnnotationPausedBy]
	oc.Pause = observed.Pause{Paused: c.Spec.Paused, ByFerry: c.Spec.Paused && byFerry}
	if r := c.Spec.InfrastructureRef; r != nil {
		oc.InfrastructureRef = refOf(r.Kind, r.Name)
	}
	if r := c.Spec.ControlPlaneRef; r != nil {
		oc.ControlPlaneRef = refOf(r.Kind, r.Name)
	}
	if c.Spec.ControlPlaneEndpoint.IsValid() {
		oc.ControlPlaneEndpoint = c.Spec.ControlPlaneEndpoint.String()
	}
	var prev *corev1.ObjectReference
	if a, ok := c.Annotations[observed.AnnotationPreviousInfrastructureRef]; ok && json.Unmarshal([]byte(a), &prev) == nil {
		oc.PreviousInfrastructure = &observed.Ref{} // none, when it had none
		if prev != nil {
			oc.PreviousInfrastructure = &observed.Ref{Kind: prev.Kind, Name: prev.Name}
		}
	}
	s.Cluster = oc

	var osc infrav1.OpenStackCluster
	found, err = o.get(ctx, ns, name, &osc)
	if err != nil || !found {
		return err
	}
	s.OpenStackCluster = &observed.OpenStackCluster{Pause: pauseOf(&osc), Name: name, Ready: osc.Status.Ready}
	return nil
}

// secrets records the key names, never the values, of the Secrets the
// planner asks for: the cluster's own (<cluster>-kubeconfig, -etcd, -ca,
// -sa and the identity Secret) and the copies the plan takes them from.
// They are read by name, so a namespace of many clusters costs each plan
// the same.
func (o *Observer) secrets(ctx context.Context, p *v1alpha1.MigrationPlan, s *observed.Snapshot) error {
	ns, name := p.Spec.Cluster.Namespace, p.Spec.Cluster.Name
	var keys []client.ObjectKey
	for _, suffix := range observed.SecretSuffixes {
		keys = append(keys, client.ObjectKey{Namespace: ns, Name: name + "-" + suffix})
	}
	id := p.Spec.Target.Identity
	if id.SecretName != "" {
		keys = append(keys, client.ObjectKey{Namespace: ns, Name: id.SecretName})
	}
	if a := p.Spec.Adopt; a != nil && a.SecretsFrom != "" {
		for _, suffix := range observed.SecretSuffixes {
			keys = append(keys, client.ObjectKey{Namespace: a.SecretsFrom, Name: name + "-" + suffix})
		}
	}
	if f := id.From; f != nil {
		keys = append(keys, client.ObjectKey{Namespace: f.Namespace, Name: f.Name})
	}
	for _, key := range keys {
		if s.Secret(key.Namespace, key.Name) != nil {
			continue
		}
		var sec corev1.Secret
		found, err := o.get(ctx, key.Namespace, key.Name, &sec)
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		names := make([]string, 0, len(sec.Data))
		for k := range sec.Data {
			names = append(names, k)
		}
		sort.Strings(names)
		os := observed.Secret{Namespace: sec.Namespace, Name: sec.Name, Keys: names,
			Cluster:         sec.Labels[clusterv1.ClusterNameLabel],
			LabelledByFerry: sec.Annotations[observed.AnnotationLabelledBy] == p.Metadata.Name}
		os.Owners = ownersOf(&sec)
		s.Secrets = append(s.Secrets, os)
		if sec.Namespace == ns && sec.Labels[observed.LabelCreatedBy] == p.Metadata.Name {
			s.Created = append(s.Created, createdOf("Secret", &sec))
		}
	}
	return nil
}

func (o *Observer) controlPlane(ctx context.Context, p *v1alpha1.MigrationPlan, s *observed.Snapshot) error {
	ns, cpName := p.Spec.Cluster.Namespace, p.Spec.Target.ControlPlane.Name
	if p.Spec.Target.ControlPlane.Provider == v1alpha1.ProviderKamaji {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(kube.KamajiGVK)
		found, err := o.get(ctx, ns, cpName, u)
		if err != nil || !found {
			return err
		}
		cp := &observed.ControlPlane{Pause: pauseOf(u), Kind: v1alpha1.ProviderKamaji, Name: cpName}
		cp.Replicas = intField(u, "spec", "replicas")
		cp.ReadyReplicas = intField(u, "status", "readyReplicas")
		cp.UpdatedReplicas = intField(u, "status", "updatedReplicas")
		cp.UnavailableReplicas = intField(u, "status", "unavailableReplicas")
		cp.Ready, _, _ = unstructured.NestedBool(u.Object, "status", "ready")
		cp.Version, _, _ = unstructured.NestedString(u.Object, "spec", "version")
		cp.PreferredAddressTypes, _, _ = unstructured.NestedStringSlice(u.Object, "spec", "kubelet", "preferredAddressTypes")
		_, cp.ChangedByFerry = u.GetAnnotations()[observed.AnnotationPreviousAddressTypes]
		cp.Owners = ownersOf(u)
		s.ControlPlane = cp
		return nil
	}
	var kcp controlplanev1.KubeadmControlPlane
	found, err := o.get(ctx, ns, cpName, &kcp)
	if err != nil || !found {
		return err
	}
	cp := &observed.ControlPlane{
		Pause:               pauseOf(&kcp),
		Kind:                v1alpha1.ProviderKubeadm,
		Name:                cpName,
		ReadyReplicas:       int(kcp.Status.ReadyReplicas),
		UpdatedReplicas:     int(kcp.Status.UpdatedReplicas),
		UnavailableReplicas: int(kcp.Status.UnavailableReplicas),
		Ready:               kcp.Status.Ready,
		Version:             kcp.Spec.Version,
		InfrastructureRef:   refOf(kcp.Spec.MachineTemplate.InfrastructureRef.Kind, kcp.Spec.MachineTemplate.InfrastructureRef.Name),
	}
	if kcp.Spec.Replicas != nil {
		cp.Replicas = int(*kcp.Spec.Replicas)
	}
	if kcp.Spec.RolloutAfter != nil {
		cp.RolloutAfter = kcp.Spec.RolloutAfter.UTC().Format("2006-01-02T15:04:05Z")
	}
	s.ControlPlane = cp
	return nil
}

func intField(u *unstructured.Unstructured, path ...string) int {
	v, _, _ := unstructured.NestedInt64(u.Object, path...)
	return int(v)
}

// machines reads the cluster's Machines, MachineSets and MachineDeployments.
func (o *Observer) machines(ctx context.Context, ns, name string, s *observed.Snapshot) error {
	var machines clusterv1.MachineList
	if err := o.listCluster(ctx, &machines, ns, name); err != nil {
		return err
	}
	for _, m := range machines.Items {
		if m.Spec.ClusterName != name {
			continue
		}
		s.Machines = append(s.Machines, machineOf(&m))
	}
	var sets clusterv1.MachineSetList
	if err := o.listCluster(ctx, &sets, ns, name); err != nil {
		return err
	}
	for _, ms := range sets.Items {
		if ms.Spec.ClusterName != name {
			continue
		}
		r := ms.Spec.Template.Spec.InfrastructureRef
		s.MachineSets = append(s.MachineSets, observed.MachineSet{
			Pause: pauseOf(&ms), Name: ms.Name,
			Deployment:        ms.Labels[clusterv1.MachineDeploymentNameLabel],
			InfrastructureRef: refOf(r.Kind, r.Name),
		})
	}
	var mds clusterv1.MachineDeploymentList
	if err := o.listCluster(ctx, &mds, ns, name); err != nil {
		return err
	}
	for _, md := range mds.Items {
		if md.Spec.ClusterName != name {
			continue
		}
		s.MachineDeployments = append(s.MachineDeployments, machineDeploymentOf(&md))
	}
	return nil
}

// machineOf is what the planner needs of a Machine.
func machineOf(m *clusterv1.Machine) observed.Machine {
	om := observed.Machine{
		Pause:             pauseOf(m),
		Name:              m.Name,
		InfrastructureRef: refOf(m.Spec.InfrastructureRef.Kind, m.Spec.InfrastructureRef.Name),
		Deployment:        m.Labels[clusterv1.MachineDeploymentNameLabel],
		MachineSet:        m.Labels[clusterv1.MachineSetNameLabel],
	}
	_, om.ControlPlane = m.Labels[clusterv1.MachineControlPlaneLabel]
	_, om.Adopted = m.Annotations[observed.AnnotationAdopted]
	if r := m.Spec.Bootstrap.ConfigRef; r != nil {
		om.BootstrapRef = refOf(r.Kind, r.Name)
	}
	if m.Spec.ProviderID != nil {
		om.ProviderID = *m.Spec.ProviderID
	}
	if m.Status.NodeRef != nil {
		om.NodeRef = m.Status.NodeRef.Name
	}
	return om
}

// machineDeploymentOf is what the planner needs of a MachineDeployment.
func machineDeploymentOf(md *clusterv1.MachineDeployment) observed.MachineDeployment {
	r := md.Spec.Template.Spec.InfrastructureRef
	od := observed.MachineDeployment{
		Pause:               pauseOf(md),
		Name:                md.Name,
		ReadyReplicas:       int(md.Status.ReadyReplicas),
		UpdatedReplicas:     int(md.Status.UpdatedReplicas),
		UnavailableReplicas: int(md.Status.UnavailableReplicas),
		InfrastructureRef:   refOf(r.Kind, r.Name),
		Deleting:            md.DeletionTimestamp != nil,
	}
	// A MachineDeployment is paused by spec.paused as well as by the
	// annotation.
	if md.Spec.Paused {
		od.Paused = true
	}
	if md.Spec.Replicas != nil {
		od.Replicas = int(*md.Spec.Replicas)
	}
	if md.Spec.RolloutAfter != nil {
		od.RolloutAfter = md.Spec.RolloutAfter.UTC().Format("2006-01-02T15:04:05Z")
	}
	return od
}

// names records which bootstrap and infrastructure objects exist for the
// cluster: those with its cluster-name label, and those with none (made by
// hand or restored without labels).
func (o *Observer) names(ctx context.Context, ns, name string, s *observed.Snapshot) error {
	lists := []struct {
		list func() client.ObjectList
		into *[]string
	}{
		{func() client.ObjectList { return &bootstrapv1.KubeadmConfigList{} }, &s.KubeadmConfigs},
		{func() client.ObjectList { return &bootstrapv1.KubeadmConfigTemplateList{} }, &s.KubeadmConfigTemplates},
		{func() client.ObjectList { return &infrav1.OpenStackMachineTemplateList{} }, &s.OpenStackMachineTemplates},
		{func() client.ObjectList { return &infrav1.OpenStackMachineList{} }, &s.OpenStackMachines},
	}
	clusters := []string{""}
	if o.indexed() {
		clusters = []string{name, ""}
	}
	for _, l := range lists {
		var names []string
		for _, c := range clusters {
			objs, err := o.listObjects(ctx, l.list(), ns, c)
			if err != nil {
				return err
			}
			for _, obj := range objs {
				if label := obj.GetLabels()[clusterv1.ClusterNameLabel]; label == name || label == "" {
					names = append(names, obj.GetName())
				}
			}
		}
		slices.Sort(names)
		*l.into = names
	}
	return nil
}

// boundServers records the cluster's OpenStackServers that name their
// Nova server and are not held paused by ferry.
func (o *Observer) boundServers(ctx context.Context, ns, name string, s *observed.Snapshot) error {
	var list infrav1alpha1.OpenStackServerList
	if err := o.listCluster(ctx, &list, ns, name); err != nil {
		return err
	}
	s.BoundServers = nil
	for i := range list.Items {
		oss := &list.Items[i]
		if oss.Labels[clusterv1.ClusterNameLabel] != name || oss.Status.InstanceID == nil || oss.Annotations[observed.AnnotationPausedBy] != "" {
			continue
		}
		s.BoundServers = append(s.BoundServers, oss.Name)
	}
	slices.Sort(s.BoundServers)
	return nil
}

// listObjects lists the objects of a kind that belong to cluster in ns
// (listCluster) as client.Objects.
func (o *Observer) listObjects(ctx context.Context, list client.ObjectList, ns, cluster string) ([]client.Object, error) {
	if err := o.listCluster(ctx, list, ns, cluster); err != nil {
		return nil, err
	}
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return nil, fmt.Errorf("read %T: %w", list, err)
	}
	objs := make([]client.Object, 0, len(items))
	for _, item := range items {
		obj, ok := item.(client.Object)
		if !ok {
			return nil, fmt.Errorf("observer: %T in %T is not an object", item, list)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// createdKinds are the kinds of the management cluster ferry creates, read
// for the objects it created (observed.LabelCreatedBy).
var createdKinds = []struct {
	kind string
	list func() client.ObjectList
}{
	{"Cluster", func() client.ObjectList { return &clusterv1.ClusterList{} }},
	{"OpenStackCluster", func() client.ObjectList { return &infrav1.OpenStackClusterList{} }},
	{"KubeadmControlPlane", func() client.ObjectList { return &controlplanev1.KubeadmControlPlaneList{} }},
	{"KubeadmConfig", func() client.ObjectList { return &bootstrapv1.KubeadmConfigList{} }},
	{"KubeadmConfigTemplate", func() client.ObjectList { return &bootstrapv1.KubeadmConfigTemplateList{} }},
	{"OpenStackMachineTemplate", func() client.ObjectList { return &infrav1.OpenStackMachineTemplateList{} }},
	{"OpenStackMachine", func() client.ObjectList { return &infrav1.OpenStackMachineList{} }},
	{"OpenStackServer", func() client.ObjectList { return &infrav1alpha1.OpenStackServerList{} }},
	{"Machine", func() client.ObjectList { return &clusterv1.MachineList{} }},
	{"MachineSet", func() client.ObjectList { return &clusterv1.MachineSetList{} }},
	{"MachineDeployment", func() client.ObjectList { return &clusterv1.MachineDeploymentList{} }},
}

// created records the objects of the cluster ferry created for the plan,
// which a rollback removes (the Secrets come with secrets).
func (o *Observer) created(ctx context.Context, ns, name, plan string, s *observed.Snapshot) error {
	for _, k := range createdKinds {
		objs, err := o.listObjects(ctx, k.list(), ns, name)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			if obj.GetLabels()[observed.LabelCreatedBy] == plan && ClusterOf(obj) == name {
				s.Created = append(s.Created, createdOf(k.kind, obj))
			}
		}
	}
	slices.SortFunc(s.Created, func(a, b observed.Created) int {
		if a.Kind != b.Kind {
			return strings.Compare(a.Kind, b.Kind)
		}
		return strings.Compare(a.Name, b.Name)
	})
	return nil
}

func createdOf(kind string, obj client.Object) observed.Created {
	return observed.Created{Kind: kind, Name: obj.GetName(), Phase: obj.GetLabels()[observed.LabelPhase], Deleting: obj.GetDeletionTimestamp() != nil}
}
