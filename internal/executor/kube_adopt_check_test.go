package executor_test

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/bootstrap/kubeadm/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/controlplane/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/testenv"
)

// kubeExpect compares one field of the end state.
func kubeExpect(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %v; want %v", what, got, want)
	}
}

// kubeRefTo is the reference the adopted objects must hold: always with
// its namespace, which CAPI's controllers look the object up in.
func kubeRefTo(apiVersion, kind, name string) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Name: name, Namespace: kubeNamespace}
}

// kubeCheckAdopted checks the adopted cluster in the management cluster,
// object by object, against what seed 000 and STEPS.md ask for.
func kubeCheckAdopted(t *testing.T, c client.Client, workload *testenv.Kube) {
	t.Helper()
	const (
		cp     = "capi-quickstart-control-plane"
		md     = "capi-quickstart-md-0"
		ms     = "capi-quickstart-md-0-adopted"
		infra  = "infrastructure.cluster.x-k8s.io/v1beta1"
		plan   = kubeCluster // the plan is named after the cluster
		config = "capi-quickstart-cloud-config"
	)
	identity := &infrav1.OpenStackIdentityReference{Name: config, CloudName: "openstack"}
	network := &infrav1.NetworkParam{Filter: &infrav1.NetworkFilter{Name: "k8s-net"}}

	// Secrets: copied byte for byte, never regenerated.
	for _, tc := range []struct{ name, fromNS, from string }{
		{kubeCluster + "-sa", "capi-backup", kubeCluster + "-sa"},
		{config, "ferry-system", "openstack-credentials"},
	} {
		var got, src corev1.Secret
		kubeMustGet(t, c, tc.name, &got)
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: tc.fromNS, Name: tc.from}, &src); err != nil {
			t.Fatal(err)
		}
		for k, v := range src.Data {
			if !bytes.Equal(got.Data[k], v) {
				t.Errorf("Secret %s key %s differs from %s/%s", tc.name, k, tc.fromNS, tc.from)
			}
		}
		kubeExpect(t, "Secret "+tc.name+" keys", len(got.Data), len(src.Data))
	}
	var cloud corev1.Secret
	kubeMustGet(t, c, config, &cloud)
	kubeExpect(t, "cloud-config move label", cloud.Labels["clusterctl.cluster.x-k8s.io/move"], "true")

	var cl clusterv1.Cluster
	kubeMustGet(t, c, kubeCluster, &cl)
	kubeExpect(t, "Cluster paused", cl.Spec.Paused, false)
	kubeExpect(t, "Cluster infrastructureRef", *cl.Spec.InfrastructureRef, kubeRefTo(infra, "OpenStackCluster", kubeCluster))
	kubeExpect(t, "Cluster controlPlaneRef", *cl.Spec.ControlPlaneRef, kubeRefTo("controlplane.cluster.x-k8s.io/v1beta1", "KubeadmControlPlane", cp))
	kubeExpect(t, "Cluster controlPlaneEndpoint", cl.Spec.ControlPlaneEndpoint, kubeWorkloadEndpoint(t, workload))

	var osc infrav1.OpenStackCluster
	kubeMustGet(t, c, kubeCluster, &osc)
	kubeExpect(t, "OpenStackCluster identityRef", osc.Spec.IdentityRef, *identity)
	kubeExpect(t, "OpenStackCluster network", osc.Spec.Network, network)
	kubeExpect(t, "OpenStackCluster subnets", osc.Spec.Subnets, []infrav1.SubnetParam{{Filter: &infrav1.SubnetFilter{Name: "k8s-subnet"}}})
	kubeExpect(t, "OpenStackCluster externalNetwork", osc.Spec.ExternalNetwork, &infrav1.NetworkParam{Filter: &infrav1.NetworkFilter{Name: "public"}})
	// optional.Bool is its own pointer type: compare what it points at.
	kubeExpect(t, "OpenStackCluster disableExternalNetwork", ptr.Deref((*bool)(osc.Spec.DisableExternalNetwork), true), false)
	// The endpoint is kept: no load balancer, no floating IP of CAPO's, and
	// its address recorded so that deleting a control-plane machine keeps it.
	kubeExpect(t, "OpenStackCluster apiServerLoadBalancer", osc.Spec.APIServerLoadBalancer, &infrav1.APIServerLoadBalancer{Enabled: ptr.To(false)})
	kubeExpect(t, "OpenStackCluster disableAPIServerFloatingIP", ptr.Deref((*bool)(osc.Spec.DisableAPIServerFloatingIP), false), true)
	kubeExpect(t, "OpenStackCluster apiServerFloatingIP", ptr.Deref(osc.Spec.APIServerFloatingIP, ""), kubeWorkloadEndpoint(t, workload).Host)
	kubeExpect(t, "OpenStackCluster managedSecurityGroups", osc.Spec.ManagedSecurityGroups, (*infrav1.ManagedSecurityGroups)(nil))
	kubeExpect(t, "OpenStackCluster controlPlaneEndpoint", *osc.Spec.ControlPlaneEndpoint, cl.Spec.ControlPlaneEndpoint)
	kubeExpect(t, "OpenStackCluster controlPlaneAvailabilityZones", osc.Spec.ControlPlaneAvailabilityZones, []string{"nova"})

	var kc bootstrapv1.KubeadmConfig
	kubeMustGet(t, c, kubeCPNode, &kc)
	kubeExpect(t, "KubeadmConfig kubernetesVersion", kc.Spec.ClusterConfiguration.KubernetesVersion, kubeVersion)
	kubeExpect(t, "KubeadmConfig initConfiguration", kc.Spec.InitConfiguration, (*bootstrapv1.InitConfiguration)(nil))
	kubeExpect(t, "KubeadmConfig join kubelet args", kc.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs, map[string]string{"cloud-provider": "external"})

	var kcp controlplanev1.KubeadmControlPlane
	kubeMustGet(t, c, cp, &kcp)
	kubeExpect(t, "KubeadmControlPlane replicas", *kcp.Spec.Replicas, int32(1))
	kubeExpect(t, "KubeadmControlPlane version", kcp.Spec.Version, kubeVersion)
	kubeExpect(t, "KubeadmControlPlane infrastructureRef", kcp.Spec.MachineTemplate.InfrastructureRef, kubeRefTo(infra, "OpenStackMachineTemplate", cp))
	// The same ClusterConfiguration and JoinConfiguration as the adopted
	// node's KubeadmConfig: KubeadmControlPlane finds it up to date.
	kubeExpect(t, "KubeadmControlPlane clusterConfiguration", kcp.Spec.KubeadmConfigSpec.ClusterConfiguration, kc.Spec.ClusterConfiguration)
	kubeExpect(t, "KubeadmControlPlane joinConfiguration", kcp.Spec.KubeadmConfigSpec.JoinConfiguration, kc.Spec.JoinConfiguration)

	var osmt infrav1.OpenStackMachineTemplate
	kubeMustGet(t, c, cp, &osmt)
	kubeExpect(t, "control-plane OpenStackMachineTemplate spec", osmt.Spec.Template.Spec, infrav1.OpenStackMachineSpec{
		Flavor: ptr.To("m1.medium"), Image: infrav1.ImageParam{Filter: &infrav1.ImageFilter{Name: ptr.To("ubuntu-2204-kube-v1.31")}},
		SSHKeyName: "capi-key", Ports: []infrav1.PortOpts{{Network: network}}, IdentityRef: identity,
	})
	kubeMustGet(t, c, md, &osmt)
	kubeExpect(t, "worker OpenStackMachineTemplate flavor", *osmt.Spec.Template.Spec.Flavor, "m1.large")

	var kct bootstrapv1.KubeadmConfigTemplate
	kubeMustGet(t, c, md, &kct)
	kubeExpect(t, "KubeadmConfigTemplate kubelet args", kct.Spec.Template.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs, map[string]string{"cloud-provider": "external"})

	var d clusterv1.MachineDeployment
	kubeMustGet(t, c, md, &d)
	selected := map[string]string{clusterv1.ClusterNameLabel: kubeCluster, clusterv1.MachineDeploymentNameLabel: md}
	kubeExpect(t, "MachineDeployment replicas", *d.Spec.Replicas, int32(2))
	kubeExpect(t, "MachineDeployment selector", d.Spec.Selector.MatchLabels, selected)
	kubeExpect(t, "MachineDeployment template labels", d.Spec.Template.Labels, selected)
	kubeExpect(t, "MachineDeployment version", *d.Spec.Template.Spec.Version, kubeVersion)
	kubeExpect(t, "MachineDeployment failureDomain", *d.Spec.Template.Spec.FailureDomain, "nova")
	kubeExpect(t, "MachineDeployment bootstrap", *d.Spec.Template.Spec.Bootstrap.ConfigRef, kubeRefTo("bootstrap.cluster.x-k8s.io/v1beta1", "KubeadmConfigTemplate", md))
	kubeExpect(t, "MachineDeployment infrastructureRef", d.Spec.Template.Spec.InfrastructureRef, kubeRefTo(infra, "OpenStackMachineTemplate", md))

	var set clusterv1.MachineSet
	kubeMustGet(t, c, ms, &set)
	kubeExpect(t, "MachineSet owner", len(set.OwnerReferences) == 1 && set.OwnerReferences[0].UID == d.UID &&
		set.OwnerReferences[0].Kind == "MachineDeployment" && ptr.Deref(set.OwnerReferences[0].Controller, false), true)
	kubeExpect(t, "MachineSet replicas", *set.Spec.Replicas, int32(2))
	kubeExpect(t, "MachineSet selector template hash", set.Spec.Selector.MatchLabels[clusterv1.MachineDeploymentUniqueLabel], "adopted")
	kubeExpect(t, "MachineSet template hash label", set.Labels[clusterv1.MachineDeploymentUniqueLabel], "adopted")
	kubeExpect(t, "MachineDeployment strategy", d.Spec.Strategy != nil && d.Spec.Strategy.Type == clusterv1.RollingUpdateMachineDeploymentStrategyType, true)
	kubeExpect(t, "MachineSet template spec", set.Spec.Template.Spec, d.Spec.Template.Spec)

	machines := []struct {
		node, deployment, set string
		controlPlane          bool
	}{{node: kubeCPNode, controlPlane: true}, {node: kubeWorker1, deployment: md, set: ms}, {node: kubeWorker2, deployment: md, set: ms}}
	for _, tc := range machines {
		var m clusterv1.Machine
		kubeMustGet(t, c, tc.node, &m)
		what := "Machine " + tc.node
		kubeExpect(t, what+" adopted", m.Annotations[observed.AnnotationAdopted], plan)
		kubeExpect(t, what+" providerID", *m.Spec.ProviderID, "openstack:///"+kubeServers[tc.node])
		kubeExpect(t, what+" infrastructureRef", m.Spec.InfrastructureRef, kubeRefTo(infra, "OpenStackMachine", tc.node))
		kubeExpect(t, what+" dataSecretName", ptr.Deref(m.Spec.Bootstrap.DataSecretName, ""), tc.node)
		kubeExpect(t, what+" version", *m.Spec.Version, kubeVersion)
		_, isCP := m.Labels[clusterv1.MachineControlPlaneLabel]
		kubeExpect(t, what+" control-plane label", isCP, tc.controlPlane)
		kubeExpect(t, what+" deployment label", m.Labels[clusterv1.MachineDeploymentNameLabel], tc.deployment)
		kubeExpect(t, what+" set label", m.Labels[clusterv1.MachineSetNameLabel], tc.set)
		if tc.set != "" {
			kubeExpect(t, what+" template hash label", m.Labels[clusterv1.MachineDeploymentUniqueLabel], "adopted")
		}
		if tc.controlPlane {
			kubeExpect(t, what+" bootstrap", *m.Spec.Bootstrap.ConfigRef, kubeRefTo("bootstrap.cluster.x-k8s.io/v1beta1", "KubeadmConfig", tc.node))
			kubeExpect(t, what+" control-plane-name label", m.Labels[clusterv1.MachineControlPlaneNameLabel], cp)
		}
		var osm infrav1.OpenStackMachine
		kubeMustGet(t, c, tc.node, &osm)
		kubeExpect(t, "OpenStackMachine "+tc.node+" providerID", *osm.Spec.ProviderID, "openstack:///"+kubeServers[tc.node])
		kubeExpect(t, "OpenStackMachine "+tc.node+" identityRef", osm.Spec.IdentityRef, identity)
	}

	// Every object ferry made carries the cluster's label, and none is
	// still paused: every pause ferry set was lifted.
	for _, tc := range []struct {
		obj   func() client.Object
		names []string
	}{
		{func() client.Object { return &corev1.Secret{} }, []string{kubeCluster + "-sa", config}},
		{func() client.Object { return &clusterv1.Cluster{} }, []string{kubeCluster}},
		{func() client.Object { return &infrav1.OpenStackCluster{} }, []string{kubeCluster}},
		{func() client.Object { return &bootstrapv1.KubeadmConfig{} }, []string{kubeCPNode}},
		{func() client.Object { return &controlplanev1.KubeadmControlPlane{} }, []string{cp}},
		{func() client.Object { return &clusterv1.Machine{} }, []string{kubeCPNode, kubeWorker1, kubeWorker2}},
		{func() client.Object { return &infrav1.OpenStackMachine{} }, []string{kubeCPNode, kubeWorker1, kubeWorker2}},
		{func() client.Object { return &infrav1.OpenStackMachineTemplate{} }, []string{cp, md}},
		{func() client.Object { return &bootstrapv1.KubeadmConfigTemplate{} }, []string{md}},
		{func() client.Object { return &clusterv1.MachineDeployment{} }, []string{md}},
		{func() client.Object { return &clusterv1.MachineSet{} }, []string{ms}},
	} {
		for _, name := range tc.names {
			obj := tc.obj()
			kubeMustGet(t, c, name, obj)
			what := fmt.Sprintf("%T %s", obj, name)
			kubeExpect(t, what+" cluster-name label", obj.GetLabels()[clusterv1.ClusterNameLabel], kubeCluster)
			for _, a := range []string{clusterv1.PausedAnnotation, observed.AnnotationPausedBy} {
				if _, ok := obj.GetAnnotations()[a]; ok {
					t.Errorf("%s still has annotation %s", what, a)
				}
			}
		}
	}
}
