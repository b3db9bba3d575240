package main

import (
	"cmp"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// script writes the bash script with which a person adopts one baseline
// cluster the way seed 000 does it by hand: one kubectl process per change
// (create from a manifest, patch), objects created paused and unpaused at
// the end of their phase, and between phases a loop that polls every
// second until the controllers report what ferry waits for. The manifests
// are the objects ferry created for the cluster's twin in ferry's fleet,
// renamed, so that the controller stand-ins drive both the same way.
//
// Its methods add lines; the first error (a kind the API server does not
// know, an object that does not convert) sticks, as in bufio.Writer, and
// adoptScript returns it.
type script struct {
	b         strings.Builder
	err       error
	scheme    *runtime.Scheme
	mapper    meta.RESTMapper
	r         *renamer
	namespace string // the baseline cluster's
	twin      *adopted
	backup    map[string]*corev1.Secret
	uids      int // owner UIDs read so far, for variable names
}

// adoptScript is the script of the baseline cluster r.to. twin is what
// ferry created for cluster r.from; backup holds the Secrets the baseline
// cluster lacks, by name, as its backup namespace has them (nil for one
// that has no backup copy, whose data then are ferry's).
func adoptScript(scheme *runtime.Scheme, mapper meta.RESTMapper, r *renamer, twin *adopted, backup map[string]*corev1.Secret) (string, error) {
	s := &script{scheme: scheme, mapper: mapper, r: r, namespace: r.toNamespace, twin: twin, backup: backup}
	s.header()
	for _, phase := range []func() error{s.clusterPhase, s.controlPlanePhase, s.workersPhase} {
		if err := phase(); err != nil {
			return "", fmt.Errorf("script for cluster %s/%s from ferry's %s/%s: %w", r.toNamespace, r.to, r.fromNamespace, r.from, err)
		}
	}
	s.line("echo 'cluster %s/%s adopted'", s.namespace, r.to)
	return s.b.String(), nil
}

func (s *script) line(format string, args ...any) {
	fmt.Fprintf(&s.b, format+"\n", args...)
}

func (s *script) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

func (s *script) header() {
	s.line(`#!/usr/bin/env bash
# Seed 000's adoption of cluster %[1]s/%[2]s, done by hand: one kubectl process
# per change, objects created paused and unpaused at the end of each phase,
# and a loop that polls every second between phases. Written by hack/bench,
# the kubectl baseline of 'make bench', from the objects ferry created for
# its twin %[3]s/%[4]s. Needs kubectl on the PATH and KUBECONFIG reaching the
# management cluster; writes the workload cluster's kubeconfig to ./kubeconfig.
set -euo pipefail
set -x # the benchmark counts the kubectl processes in this trace`, s.namespace, s.r.to, s.r.fromNamespace, s.r.from)
}

// clusterPhase: the Secrets, the Cluster (paused) and its
// OpenStackCluster, the Cluster unpaused, and a wait until CAPO reports the
// infrastructure ready. The SSH keypair is seed 000's manual prerequisite,
// made before the script runs.
func (s *script) clusterPhase() error {
	twin := s.twin
	cluster, err := only(twin.clusters)
	if err != nil {
		return err
	}
	osc, err := only(twin.oscs)
	if err != nil {
		return err
	}
	s.line("\n# Phase cluster")
	// Those restored from the backup first, then the cloud credentials,
	// as seed 000 lists them.
	for _, restored := range []bool{true, false} {
		for i := range twin.secrets {
			sec := &twin.secrets[i]
			if from, missing := s.backup[s.r.rename(sec.Name)]; missing && (from != nil) == restored {
				s.createSecret(sec, cmp.Or(from, sec))
			}
		}
	}
	s.create(cluster, true)
	s.create(osc, false)
	s.unpause(cluster)
	s.waitFor(osc, "{.status.ready}", "true")
	return s.err
}

// controlPlanePhase: the KubeadmConfigs, the KubeadmControlPlane and the
// control-plane Machines (paused), their OpenStackMachineTemplate and
// OpenStackMachines, all unpaused, a wait until the KubeadmControlPlane
// reports every replica ready and updated, then the cloud controller
// manager applied to the workload cluster (seed 000's manual step).
func (s *script) controlPlanePhase() error {
	twin := s.twin
	kcp, err := only(twin.kcps)
	if err != nil {
		return err
	}
	template, err := named(twin.osmts, kcp.Spec.MachineTemplate.InfrastructureRef.Name)
	if err != nil {
		return err
	}
	machines := twin.machinesWhere(func(m *clusterv1.Machine) bool {
		_, ok := m.Labels[clusterv1.MachineControlPlaneLabel]
		return ok
	})
	osms, err := twin.osmsOf(machines)
	if err != nil {
		return err
	}
	s.line("\n# Phase control-plane")
	for i := range twin.kubeadmConfigs {
		s.create(&twin.kubeadmConfigs[i], false)
	}
	s.create(kcp, true)
	for _, m := range machines {
		s.create(m, true)
	}
	s.create(template, false)
	for _, o := range osms {
		s.create(o, false)
	}
	for _, m := range machines {
		s.unpause(m)
	}
	s.unpause(kcp)
	s.waitFor(kcp, "{.status.replicas}/{.status.readyReplicas}/{.status.updatedReplicas}", replicas3(kcp.Spec.Replicas))
	s.applyCloudControllerManager()
	return s.err
}

// workersPhase adopts each MachineDeployment's machines.
func (s *script) workersPhase() error {
	for i := range s.twin.mds {
		if err := s.pool(&s.twin.mds[i]); err != nil {
			return err
		}
	}
	return s.err
}

// pool: the KubeadmConfigTemplate, the MachineDeployment, its MachineSet
// and Machines (paused; the MachineSet owned by the MachineDeployment,
// whose UID the script reads), their OpenStackMachineTemplate and
// OpenStackMachines, all unpaused, and a wait until the MachineDeployment
// reports every replica ready and updated.
func (s *script) pool(md *clusterv1.MachineDeployment) error {
	twin := s.twin
	kct, err := named(twin.kcts, md.Spec.Template.Spec.Bootstrap.ConfigRef.Name)
	if err != nil {
		return err
	}
	template, err := named(twin.osmts, md.Spec.Template.Spec.InfrastructureRef.Name)
	if err != nil {
		return err
	}
	var sets []*clusterv1.MachineSet
	for i := range twin.mss {
		if twin.mss[i].Labels[clusterv1.MachineDeploymentNameLabel] == md.Name {
			sets = append(sets, &twin.mss[i])
		}
	}
	machines := twin.machinesWhere(func(m *clusterv1.Machine) bool {
		return m.Labels[clusterv1.MachineDeploymentNameLabel] == md.Name
	})
	osms, err := twin.osmsOf(machines)
	if err != nil {
		return err
	}
	s.line("\n# Phase workers: MachineDeployment %s", s.r.rename(md.Name))
	s.create(kct, false)
	s.create(md, true)
	for _, set := range sets {
		s.create(set, true)
	}
	for _, m := range machines {
		s.create(m, true)
	}
	s.create(template, false)
	for _, o := range osms {
		s.create(o, false)
	}
	s.unpause(md)
	for _, set := range sets {
		s.unpause(set)
	}
	for _, m := range machines {
		s.unpause(m)
	}
	s.waitFor(md, "{.status.replicas}/{.status.readyReplicas}/{.status.updatedReplicas}", replicas3(md.Spec.Replicas))
	return s.err
}

// replicas3 is "n/n/n", what the wait loops compare replicas, ready and
// updated replicas with.
func replicas3(n *int32) string {
	v := ptr.Deref(n, 1)
	return fmt.Sprintf("%d/%d/%d", v, v, v)
}

// resource is what the script calls obj's kind in kubectl commands: the
// plural (machines), as a person types it, unless another API group has a
// resource of that name. (kubectl 1.20 reads a qualified name such as
// machines.cluster.x-k8s.io as resource.version.group first, misses its
// discovery cache and discovers every API group again, 35 requests.)
func (s *script) resource(gvk schema.GroupVersionKind) (string, error) {
	mapping, err := s.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return "", fmt.Errorf("resource of %s: %w", gvk, err)
	}
	plural := mapping.Resource.Resource
	all, err := s.mapper.ResourcesFor(schema.GroupVersionResource{Resource: plural})
	if err != nil {
		return "", fmt.Errorf("resources named %s: %w", plural, err)
	}
	for _, r := range all {
		if r.Group != gvk.Group {
			return plural + "." + gvk.Group, nil
		}
	}
	return plural, nil
}

func (s *script) resourceOf(obj client.Object) (string, error) {
	gvk, err := apiutil.GVKForObject(obj, s.scheme)
	if err != nil {
		return "", err
	}
	return s.resource(gvk)
}

// create adds `kubectl create` of twin's object, renamed, paused when asked
// (spec.paused on a Cluster, the annotation on the others). Owner
// references get their UID from a `kubectl get` of the owner.
func (s *script) create(twin client.Object, paused bool) {
	m, err := manifest(s.scheme, twin)
	if err != nil {
		s.fail(err)
		return
	}
	m = s.r.renameAll(m).(map[string]any)
	if paused {
		setPaused(m)
	}
	vars, err := s.ownerUIDs(m)
	if err != nil {
		s.fail(err)
		return
	}
	s.createManifest(m, vars)
}

// createSecret adds `kubectl create` of twin's Secret, renamed, with the
// data of from.
func (s *script) createSecret(twin, from *corev1.Secret) {
	m, err := manifest(s.scheme, twin)
	if err != nil {
		s.fail(err)
		return
	}
	m = s.r.renameAll(m).(map[string]any)
	data := map[string]any{}
	for k, v := range from.Data {
		data[k] = v // []byte: YAML writes it base64-encoded, as data holds it
	}
	m["data"] = data
	s.createManifest(m, nil)
}

// createManifest adds `kubectl create -f -` of m from a here-document,
// which expands the shell variables vars (owner UIDs) and nothing else.
func (s *script) createManifest(m map[string]any, vars []string) {
	data, err := yaml.Marshal(m)
	if err != nil {
		s.fail(fmt.Errorf("manifest of %s: %w", m["kind"], err))
		return
	}
	delimiter := "'EOF'" // quoted: nothing in the document is expanded
	if len(vars) > 0 {
		rest := string(data)
		for _, v := range vars {
			rest = strings.ReplaceAll(rest, "$"+v, "")
		}
		if strings.ContainsAny(rest, "$`\\") {
			s.fail(fmt.Errorf("manifest of %s %s has characters the shell would expand", m["kind"], s.r.to))
			return
		}
		delimiter = "EOF"
	}
	s.line("kubectl create -f - <<%s\n%sEOF", delimiter, data)
}

// ownerUIDs adds, for each owner reference of m, the `kubectl get` that
// reads the owner's UID into a variable, and puts the variable in the
// reference. It returns the variables' names.
func (s *script) ownerUIDs(m map[string]any) ([]string, error) {
	meta, _ := m["metadata"].(map[string]any)
	owners, _ := meta["ownerReferences"].([]any)
	var vars []string
	for _, o := range owners {
		ref := o.(map[string]any)
		gv, err := schema.ParseGroupVersion(ref["apiVersion"].(string))
		if err != nil {
			return nil, fmt.Errorf("owner reference of %s: %w", meta["name"], err)
		}
		resource, err := s.resource(gv.WithKind(ref["kind"].(string)))
		if err != nil {
			return nil, err
		}
		s.uids++
		v := fmt.Sprintf("owner_uid_%d", s.uids)
		s.line("%s=$(kubectl get -n %s %s %s -o jsonpath='{.metadata.uid}')", v, s.namespace, resource, ref["name"])
		ref["uid"] = "$" + v
		vars = append(vars, v)
	}
	return vars, nil
}

func setPaused(m map[string]any) {
	if m["kind"] == "Cluster" {
		m["spec"].(map[string]any)["paused"] = true
		return
	}
	meta := m["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	ann[clusterv1.PausedAnnotation] = "true"
	meta["annotations"] = ann
}

// unpause adds the `kubectl patch` that lifts the pause of twin's object.
func (s *script) unpause(twin client.Object) {
	resource, err := s.resourceOf(twin)
	if err != nil {
		s.fail(err)
		return
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, clusterv1.PausedAnnotation)
	if _, ok := twin.(*clusterv1.Cluster); ok {
		patch = `{"spec":{"paused":false}}`
	}
	s.line("kubectl patch -n %s %s %s --type merge -p '%s'", s.namespace, resource, s.r.rename(twin.GetName()), patch)
}

// waitFor adds the loop that polls twin's object every second until
// jsonpath reads want.
func (s *script) waitFor(twin client.Object, jsonpath, want string) {
	resource, err := s.resourceOf(twin)
	if err != nil {
		s.fail(err)
		return
	}
	s.line("until [[ $(kubectl get -n %s %s %s -o jsonpath='%s') == %q ]]; do sleep 1; done",
		s.namespace, resource, s.r.rename(twin.GetName()), jsonpath, want)
}

// applyCloudControllerManager adds seed 000's manual step: the workload
// cluster's kubeconfig read from its Secret, and the cloud controller
// manager applied with it.
func (s *script) applyCloudControllerManager() {
	s.line("kubectl get -n %s secrets %s-kubeconfig -o jsonpath='{.data.value}' | base64 -d >kubeconfig", s.namespace, s.r.to)
	s.line("kubectl --kubeconfig kubeconfig apply -f - <<'EOF'\n%sEOF", testenv.CCMManifest)
}
