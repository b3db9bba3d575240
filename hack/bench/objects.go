package main

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/ferry-dev/ferry/internal/step"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/bootstrap/kubeadm/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/controlplane/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// adopted is what the management cluster holds of one adopted cluster:
// the objects labelled with its name, which is every object ferry creates
// for it (and the Secrets the cluster had before).
type adopted struct {
	secrets        []corev1.Secret
	clusters       []clusterv1.Cluster
	oscs           []infrav1.OpenStackCluster
	kubeadmConfigs []bootstrapv1.KubeadmConfig
	kcps           []controlplanev1.KubeadmControlPlane
	machines       []clusterv1.Machine
	osmts          []infrav1.OpenStackMachineTemplate
	osms           []infrav1.OpenStackMachine
	kcts           []bootstrapv1.KubeadmConfigTemplate
	mds            []clusterv1.MachineDeployment
	mss            []clusterv1.MachineSet
}

// readAdopted reads cluster's objects in namespace.
func readAdopted(ctx context.Context, c client.Client, namespace, cluster string) (*adopted, error) {
	var (
		secrets        corev1.SecretList
		clusters       clusterv1.ClusterList
		oscs           infrav1.OpenStackClusterList
		kubeadmConfigs bootstrapv1.KubeadmConfigList
		kcps           controlplanev1.KubeadmControlPlaneList
		machines       clusterv1.MachineList
		osmts          infrav1.OpenStackMachineTemplateList
		osms           infrav1.OpenStackMachineList
		kcts           bootstrapv1.KubeadmConfigTemplateList
		mds            clusterv1.MachineDeploymentList
		mss            clusterv1.MachineSetList
	)
	for _, list := range []client.ObjectList{&secrets, &clusters, &oscs, &kubeadmConfigs, &kcps, &machines, &osmts, &osms, &kcts, &mds, &mss} {
		if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err != nil {
			return nil, fmt.Errorf("list %T of cluster %s/%s: %w", list, namespace, cluster, err)
		}
	}
	return &adopted{
		secrets: secrets.Items, clusters: clusters.Items, oscs: oscs.Items, kubeadmConfigs: kubeadmConfigs.Items, kcps: kcps.Items,
		machines: machines.Items, osmts: osmts.Items, osms: osms.Items, kcts: kcts.Items, mds: mds.Items, mss: mss.Items,
	}, nil
}

// all lists every object.
func (a *adopted) all() []client.Object {
	var out []client.Object
	out = appendObjects(out, a.secrets)
	out = appendObjects(out, a.clusters)
	out = appendObjects(out, a.oscs)
	out = appendObjects(out, a.kubeadmConfigs)
	out = appendObjects(out, a.kcps)
	out = appendObjects(out, a.machines)
	out = appendObjects(out, a.osmts)
	out = appendObjects(out, a.osms)
	out = appendObjects(out, a.kcts)
	out = appendObjects(out, a.mds)
	return appendObjects(out, a.mss)
}

func appendObjects[T any, P interface {
	*T
	client.Object
}](out []client.Object, items []T) []client.Object {
	for i := range items {
		out = append(out, P(&items[i]))
	}
	return out
}

// named returns the item called name, or an error that says what is
// missing.
func named[T any, P interface {
	*T
	client.Object
}](items []T, name string) (P, error) {
	for i := range items {
		if p := P(&items[i]); p.GetName() == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no %T %s", *new(T), name)
}

// only returns the single item, or an error.
func only[T any, P interface {
	*T
	client.Object
}](items []T) (P, error) {
	if len(items) != 1 {
		return nil, fmt.Errorf("%d %T, want 1", len(items), *new(T))
	}
	return P(&items[0]), nil
}

// machinesWhere returns the Machines that match.
func (a *adopted) machinesWhere(match func(*clusterv1.Machine) bool) []*clusterv1.Machine {
	var out []*clusterv1.Machine
	for i := range a.machines {
		if match(&a.machines[i]) {
			out = append(out, &a.machines[i])
		}
	}
	return out
}

// osmsOf returns the OpenStackMachines of machines.
func (a *adopted) osmsOf(machines []*clusterv1.Machine) ([]*infrav1.OpenStackMachine, error) {
	var out []*infrav1.OpenStackMachine
	for _, m := range machines {
		osm, err := named(a.osms, m.Spec.InfrastructureRef.Name)
		if err != nil {
			return nil, fmt.Errorf("Machine %s: %w", m.Name, err)
		}
		out = append(out, osm)
	}
	return out, nil
}

// renamer turns an object of a cluster of ferry's fleet into the
// corresponding one of the baseline's: namespace, names that contain the
// cluster's, and provider IDs (each cluster has servers of its own).
type renamer struct {
	fromNamespace, toNamespace string
	from, to                   string
	// serverIDs maps the server IDs of from's nodes to those of to's.
	serverIDs map[string]string
}

func (r *renamer) rename(s string) string {
	if s == r.fromNamespace {
		return r.toNamespace
	}
	if id, ok := strings.CutPrefix(s, step.ProviderIDPrefix); ok && r.serverIDs[id] != "" {
		return step.ProviderIDPrefix + r.serverIDs[id]
	}
	return strings.ReplaceAll(s, r.from, r.to)
}

// renameAll renames every string value of a decoded object (not the keys).
func (r *renamer) renameAll(v any) any {
	switch v := v.(type) {
	case string:
		return r.rename(v)
	case map[string]any:
		for k, e := range v {
			v[k] = r.renameAll(e)
		}
	case []any:
		for i, e := range v {
			v[i] = r.renameAll(e)
		}
	}
	return v
}

// manifest is obj as one would write it to create it: apiVersion and kind
// set, and without status and what the API server fills in. A Secret's
// data are left out (the caller decides where they come from), so that
// they are never renamed, compared or shown.
func manifest(scheme *runtime.Scheme, obj client.Object) (map[string]any, error) {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return nil, err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	m["apiVersion"], m["kind"] = gvk.GroupVersion().String(), gvk.Kind
	delete(m, "status")
	delete(m, "data")
	meta, _ := m["metadata"].(map[string]any)
	for _, k := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink"} {
		delete(meta, k)
	}
	return m, nil
}

// canonical is obj's manifest with its status and its Secret key names
// (values left out), and without owner UIDs, which differ between twins.
func canonical(scheme *runtime.Scheme, obj client.Object) (map[string]any, error) {
	m, err := manifest(scheme, obj)
	if err != nil {
		return nil, err
	}
	full, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	if status, ok := full["status"]; ok {
		m["status"] = status
	}
	if sec, ok := obj.(*corev1.Secret); ok {
		keys := make([]string, 0, len(sec.Data))
		for k := range sec.Data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		m["data"] = strings.Join(keys, ",")
	}
	meta, _ := m["metadata"].(map[string]any)
	owners, _ := meta["ownerReferences"].([]any)
	for _, o := range owners {
		delete(o.(map[string]any), "uid")
	}
	return m, nil
}

// sameObjects compares ferry's objects of a cluster, renamed, with the
// baseline's twin, and says what differs.
func sameObjects(scheme *runtime.Scheme, r *renamer, ferry, baseline *adopted) error {
	index := func(a *adopted, r *renamer) (map[string]map[string]any, error) {
		out := map[string]map[string]any{}
		for _, obj := range a.all() {
			m, err := canonical(scheme, obj)
			if err != nil {
				return nil, err
			}
			if r != nil {
				m = r.renameAll(m).(map[string]any)
			}
			out[m["kind"].(string)+" "+m["metadata"].(map[string]any)["name"].(string)] = m
		}
		return out, nil
	}
	want, err := index(ferry, r)
	if err != nil {
		return err
	}
	got, err := index(baseline, nil)
	if err != nil {
		return err
	}
	var diffs []string
	for key, w := range want {
		g, ok := got[key]
		switch {
		case !ok:
			diffs = append(diffs, key+" is missing")
		case !reflect.DeepEqual(w, g):
			diffs = append(diffs, key+" differs from ferry's at "+firstDiff(w, g, ""))
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			diffs = append(diffs, key+" exists, but ferry made no such object")
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		return fmt.Errorf("%s", strings.Join(diffs, "; "))
	}
	return nil
}

// firstDiff names the first field where two decoded objects differ.
func firstDiff(a, b any, path string) string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if !aok || !bok {
		return fmt.Sprintf("%s (ferry's %v, the baseline's %v)", path, a, b)
	}
	keys := map[string]bool{}
	for k := range am {
		keys[k] = true
	}
	for k := range bm {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		if !reflect.DeepEqual(am[k], bm[k]) {
			return firstDiff(am[k], bm[k], path+"."+k)
		}
	}
	return path
}
