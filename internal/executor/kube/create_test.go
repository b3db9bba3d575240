package kube_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestCreateCAPOInfrastructure (not named ...OpenStack..., which `make
// test-openstack` would run again though it needs no cloud): the OpenStackCluster and a machine
// template are built from the step alone, as the planner writes it (no
// plan): the network, subnets, external network, flags, zone and identity
// from the parameters, CAPO's security groups whole from the inputs
// (the parameter only counts them), the endpoint from the Cluster, and
// apiServerFloatingIP its address unless the inputs' control plane is
// Kamaji's. Each create runs twice; a step without a flag is refused and
// creates nothing.
func TestCreateCAPOInfrastructure(t *testing.T) {
	k := testenv.StartKube(t)
	e := newExecutor(t, k)
	endpoint := clusterv1.APIEndpoint{Host: "10.0.0.10", Port: 6443}
	identity := step.IdentityRef(cluster+"-cloud-config", "openstack")
	rules := &v1alpha1.SecurityGroups{AllowAllInClusterTraffic: true, AllNodesRules: []v1alpha1.SecurityGroupRule{{
		Name: "bgp", Description: "Calico BGP", Direction: "ingress", Protocol: "tcp", PortRangeMin: 179, PortRangeMax: 179,
		RemoteManagedGroups: []string{"worker"},
	}}}
	for _, tc := range []struct {
		name   string // of the Cluster and its OpenStackCluster
		kamaji bool
		params map[string]string
		groups *v1alpha1.SecurityGroups
		check  func(t *testing.T, spec infrav1.OpenStackClusterSpec)
	}{{
		name: "kubeadm-c",
		params: step.NewParams(
			step.ParamIdentityRef, identity,
			step.ParamNetwork, step.Resource(false, "k8s-net"),
			step.ParamSubnets, step.Resources(step.Resource(false, "k8s-subnet"), step.Resource(true, "5e1a7c2e-0b1d-4d6a-9f3e-2c8b1a0d4e51")),
			step.ParamExternalNetwork, step.Resource(false, "public"),
			step.ParamDisableExternalNetwork, step.Bool(false),
			step.ParamDNSNameservers, "8.8.8.8",
			step.ParamControlPlaneZones, "nova",
			step.ParamAPIServerLoadBalancer, step.Bool(false),
			step.ParamDisableAPIServerFloatIP, step.Bool(true),
			step.ParamAPIServerFloatingIP, "the endpoint's address when it is an IP, so that deleting a control-plane machine keeps it",
			step.ParamManagedSecurityGroups, "none (the running servers keep theirs; spec.target.securityGroups asks CAPO to manage some)",
			step.ParamControlPlaneEndpoint, "kept from the Cluster"),
		check: func(t *testing.T, spec infrav1.OpenStackClusterSpec) {
			testenv.Expect(t, "network", spec.Network, &infrav1.NetworkParam{Filter: &infrav1.NetworkFilter{Name: "k8s-net"}})
			testenv.Expect(t, "subnets", spec.Subnets, []infrav1.SubnetParam{{Filter: &infrav1.SubnetFilter{Name: "k8s-subnet"}}, {ID: ptr.To("5e1a7c2e-0b1d-4d6a-9f3e-2c8b1a0d4e51")}})
			testenv.Expect(t, "externalNetwork", spec.ExternalNetwork, &infrav1.NetworkParam{Filter: &infrav1.NetworkFilter{Name: "public"}})
			testenv.Expect(t, "disableExternalNetwork", ptr.Deref((*bool)(spec.DisableExternalNetwork), true), false)
			testenv.Expect(t, "apiServerLoadBalancer", spec.APIServerLoadBalancer, &infrav1.APIServerLoadBalancer{Enabled: ptr.To(false)})
			testenv.Expect(t, "disableAPIServerFloatingIP", ptr.Deref((*bool)(spec.DisableAPIServerFloatingIP), false), true)
			testenv.Expect(t, "apiServerFloatingIP", ptr.Deref(spec.APIServerFloatingIP, ""), endpoint.Host)
			testenv.Expect(t, "apiServerFixedIP set", spec.APIServerFixedIP != nil, false)
			testenv.Expect(t, "managedSecurityGroups", spec.ManagedSecurityGroups, (*infrav1.ManagedSecurityGroups)(nil))
			testenv.Expect(t, "controlPlaneAvailabilityZones", spec.ControlPlaneAvailabilityZones, []string{"nova"})
		},
	}, {
		name:   "kamaji-c",
		kamaji: true,
		params: step.NewParams(
			step.ParamIdentityRef, identity,
			step.ParamNetwork, step.Resource(true, "9a0e3b4c-6d7f-4a1b-8c2d-3e4f5a6b7c8d"),
			step.ParamDisableExternalNetwork, step.Bool(true),
			step.ParamAPIServerLoadBalancer, step.Bool(false),
			step.ParamDisableAPIServerFloatIP, step.Bool(true),
			step.ParamAPIServerFixedIP, "10.0.0.5",
			step.ParamManagedSecurityGroups, "allowAllInClusterTraffic=true,allNodesRules=1"),
		groups: rules,
		check: func(t *testing.T, spec infrav1.OpenStackClusterSpec) {
			testenv.Expect(t, "network", spec.Network, &infrav1.NetworkParam{ID: ptr.To("9a0e3b4c-6d7f-4a1b-8c2d-3e4f5a6b7c8d")})
			testenv.Expect(t, "subnets", len(spec.Subnets), 0)
			testenv.Expect(t, "externalNetwork", spec.ExternalNetwork, (*infrav1.NetworkParam)(nil))
			testenv.Expect(t, "disableExternalNetwork", ptr.Deref((*bool)(spec.DisableExternalNetwork), false), true)
			testenv.Expect(t, "apiServerFloatingIP set", spec.APIServerFloatingIP != nil, false)
			testenv.Expect(t, "apiServerFixedIP", ptr.Deref(spec.APIServerFixedIP, ""), "10.0.0.5")
			testenv.Expect(t, "controlPlaneAvailabilityZones", len(spec.ControlPlaneAvailabilityZones), 0)
			testenv.Expect(t, "managedSecurityGroups", spec.ManagedSecurityGroups, &infrav1.ManagedSecurityGroups{
				AllowAllInClusterTraffic: true,
				AllNodesSecurityGroupRules: []infrav1.SecurityGroupRuleSpec{{
					Name: "bgp", Description: ptr.To("Calico BGP"), Direction: "ingress", Protocol: ptr.To("tcp"),
					PortRangeMin: ptr.To(179), PortRangeMax: ptr.To(179),
					RemoteManagedGroups: []infrav1.ManagedSecurityGroupName{"worker"},
				}},
			})
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			// The Cluster holds the endpoint: no workload cluster is asked.
			mustCreate(t, k.Client, &clusterv1.Cluster{ObjectMeta: testMeta(tc.name), Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: endpoint}})
			ev := event(step.Create, step.OpenStackCluster, tc.name, tc.params)
			ev.Inputs.Cluster.Name = tc.name
			ev.Inputs.SecurityGroups = tc.groups
			if tc.kamaji {
				ev.Inputs.ControlPlane = step.ObjectRef{Kind: step.KamajiControlPlane, Name: tc.name}
			}
			for attempt := 1; attempt <= 2; attempt++ {
				run(t, e, ev, "")
			}
			var osc infrav1.OpenStackCluster
			testenv.MustGet(t, k.Client, namespace, tc.name, &osc)
			testenv.Expect(t, "identityRef", osc.Spec.IdentityRef, infrav1.OpenStackIdentityReference{Name: cluster + "-cloud-config", CloudName: "openstack"})
			testenv.Expect(t, "controlPlaneEndpoint", ptr.Deref(osc.Spec.ControlPlaneEndpoint, clusterv1.APIEndpoint{}), endpoint)
			testenv.Expect(t, "cluster-name label", osc.Labels[clusterv1.ClusterNameLabel], tc.name)
			tc.check(t, osc.Spec)
		})
	}

	t.Run("a step without a flag", func(t *testing.T) {
		mustCreate(t, k.Client, &clusterv1.Cluster{ObjectMeta: testMeta("noflag-c"), Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: endpoint}})
		ev := event(step.Create, step.OpenStackCluster, "noflag-c", step.NewParams(step.ParamIdentityRef, identity,
			step.ParamNetwork, step.Resource(false, "k8s-net"), step.ParamDisableExternalNetwork, step.Bool(true), step.ParamAPIServerLoadBalancer, step.Bool(false)))
		ev.Inputs.Cluster.Name = "noflag-c"
		run(t, e, ev, "no "+step.ParamDisableAPIServerFloatIP+" parameter")
		err := k.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: "noflag-c"}, &infrav1.OpenStackCluster{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("OpenStackCluster noflag-c after a refused step: %v", err)
		}
	})

	t.Run("machine template", func(t *testing.T) {
		ev := event(step.Create, step.OpenStackMachineTemplate, cluster+"-md-0", step.NewParams(step.ParamFlavor, "m1.large", step.ParamImage, "ubuntu",
			step.ParamSSHKeyName, "capi-key", step.ParamPorts, step.NetworkPort(step.Resource(true, "9a0e3b4c-6d7f-4a1b-8c2d-3e4f5a6b7c8d")), step.ParamIdentityRef, identity))
		for attempt := 1; attempt <= 2; attempt++ {
			run(t, e, ev, "")
		}
		var osmt infrav1.OpenStackMachineTemplate
		testenv.MustGet(t, k.Client, namespace, cluster+"-md-0", &osmt)
		testenv.Expect(t, "spec", osmt.Spec.Template.Spec, infrav1.OpenStackMachineSpec{
			Flavor: ptr.To("m1.large"), Image: infrav1.ImageParam{Filter: &infrav1.ImageFilter{Name: ptr.To("ubuntu")}},
			SSHKeyName: "capi-key", Ports: []infrav1.PortOpts{{Network: &infrav1.NetworkParam{ID: ptr.To("9a0e3b4c-6d7f-4a1b-8c2d-3e4f5a6b7c8d")}}},
			IdentityRef: &infrav1.OpenStackIdentityReference{Name: cluster + "-cloud-config", CloudName: "openstack"},
		})
	})
}
