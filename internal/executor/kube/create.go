package kube

import (
	"context"
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/executor"
	"github.com/ferry-dev/ferry/internal/step"
)

// builder builds the object a create step makes. Builders read what
// they need (the kubeconfig, the running kubeadm spec, an owner) and are
// called only when the object does not exist yet.
type builder func(ctx context.Context, s *job) (client.Object, error)

// builder returns the builder of a kind, or nil.
func (e *Executor) builderFor(kind string) builder {
	return map[string]builder{
		step.Cluster:                  e.buildCluster,
		step.OpenStackCluster:         e.buildOpenStackCluster,
		step.KubeadmConfig:            e.buildKubeadmConfig,
		step.KubeadmControlPlane:      e.buildKubeadmControlPlane,
		step.Machine:                  e.buildMachine,
		step.OpenStackMachineTemplate: e.buildOpenStackMachineTemplate,
		step.OpenStackMachine:         e.buildOpenStackMachine,
		step.KubeadmConfigTemplate:    e.buildKubeadmConfigTemplate,
		step.MachineDeployment:        e.buildMachineDeployment,
		step.MachineSet:               e.buildMachineSet,
	}[kind]
}

// create makes the target unless it exists. An existing object is left as
// it is: the planner emits a create only for a missing object, so one that
// exists is this step's own earlier work (or the user's, which ferry does
// not overwrite).
func (e *Executor) create(ctx context.Context, s *job, build builder) (events.Report, error) {
	exists := &metav1.PartialObjectMetadata{}
	exists.SetGroupVersionKind(groupVersions[s.kind()].WithKind(s.kind()))
	err := e.Client.Get(ctx, s.key, exists)
	switch {
	case err == nil:
		return events.Report{Message: s.target() + " already exists"}, nil
	case !apierrors.IsNotFound(err):
		return events.Report{}, fmt.Errorf("create %s: check whether it exists: %w", s.target(), err)
	}
	obj, err := build(ctx, s)
	if err != nil {
		return events.Report{}, err
	}
	paused := pauseOf(obj).paused
	s.log.Info("creating", "object", s.target(), "paused", paused)
	err = e.Client.Create(ctx, obj, client.FieldOwner(executor.FieldManager))
	switch {
	case apierrors.IsAlreadyExists(err):
		return events.Report{Message: s.target() + " already exists"}, nil
	case err != nil:
		return events.Report{}, executor.WriteError("create "+s.target(), err)
	case paused:
		return events.Report{Message: "created " + s.target() + " (paused)"}, nil
	}
	return events.Report{Message: "created " + s.target()}, nil
}

// required reads a parameter the step cannot do without.
func required(s *job, name string) (string, error) {
	v, err := s.params().Required(name)
	return v, s.paramError(err)
}

// replicas reads the replicas parameter.
func replicas(s *job) (*int32, error) {
	n, err := s.params().Count(step.ParamReplicas)
	if err != nil {
		return nil, s.paramError(err)
	}
	return ptr.To(n), nil
}

// refParam reads a required reference parameter.
func refParam(s *job, name string) (*corev1.ObjectReference, error) {
	v, err := required(s, name)
	if err != nil {
		return nil, err
	}
	return ref(name, v, s.key.Namespace)
}

// buildCluster: the CAPI Cluster around a running cluster, created paused
// so that CAPI does not act before its infrastructure exists. Its endpoint
// is the running API server's, from the kubeconfig; its clusterNetwork the
// running one's, from kubeadm, so that CAPI and the nodes agree. An
// unreachable workload cluster is retried rather than skipped: the Cluster
// is created once, and its network must be right then.
func (e *Executor) buildCluster(ctx context.Context, s *job) (client.Object, error) {
	infra, err := refParam(s, step.ParamInfrastructureRef)
	if err != nil {
		return nil, err
	}
	cp, err := refParam(s, step.ParamControlPlaneRef)
	if err != nil {
		return nil, err
	}
	ep, err := e.endpoint(ctx, s)
	if err != nil {
		return nil, err
	}
	running, err := e.runningKubeadm(ctx, s)
	if err != nil {
		return nil, err
	}
	c := &clusterv1.Cluster{Spec: clusterv1.ClusterSpec{InfrastructureRef: infra, ControlPlaneRef: cp, ControlPlaneEndpoint: ep}}
	if running != nil {
		c.Spec.ClusterNetwork = running.clusterNetwork()
	}
	meta(c, s, s.params().Flag(step.ParamPaused))
	return c, nil
}

// buildOpenStackCluster: CAPO's infrastructure from the step's
// parameters (the plan's target, as the planner resolved it) and the
// security groups of its inputs, with the running control-plane endpoint
// (the Cluster's when it has one).
//
// The endpoint's address, when it is an IP, is also apiServerFloatingIP:
// CAPO deletes every floating IP of a control-plane server it deletes
// (a rollout, a scale-down) except that one, and it may be set only at
// creation. With the load balancer and the floating IP off, CAPO does
// nothing else with it. A Kamaji cluster has none: Kamaji owns its
// endpoint, which is not an address of the cluster's project (seed 004).
//
// Security groups are managed only when the plan asks: CAPO never attaches
// its groups to the ports of servers it adopts, and its groups admit only
// their members, so new machines in them could not reach the running ones.
//
// The plan's dnsNameservers are not set: CAPO v1beta1 applies them only to
// subnets it creates (managedSubnets), and the plan names an existing
// network, whose subnets keep their own DNS servers.
func (e *Executor) buildOpenStackCluster(ctx context.Context, s *job) (client.Object, error) {
	spec, err := openStackClusterSpec(s)
	if err != nil {
		return nil, err
	}
	ep, err := e.clusterEndpoint(ctx, s)
	if err != nil {
		return nil, err
	}
	spec.ControlPlaneEndpoint = &ep
	if s.inputs().ControlPlane.Kind != step.KamajiControlPlane {
		spec.APIServerFloatingIP = endpointIP(ep)
	}
	osc := &infrav1.OpenStackCluster{Spec: spec}
	meta(osc, s, false)
	return osc, nil
}

// openStackClusterSpec is the OpenStackCluster's spec but its endpoint,
// from the step's parameters and inputs. A parameter that does not parse
// is terminal.
func openStackClusterSpec(s *job) (infrav1.OpenStackClusterSpec, error) {
	p := s.params()
	var spec infrav1.OpenStackClusterSpec
	id, err := identity(s)
	if err != nil {
		return spec, err
	}
	byID, network, err := p.Resource(step.ParamNetwork)
	if err != nil {
		return spec, s.paramError(err)
	}
	subnets, err := p.Resources(step.ParamSubnets)
	if err != nil {
		return spec, s.paramError(err)
	}
	var flags [3]bool
	for i, key := range []string{step.ParamDisableExternalNetwork, step.ParamAPIServerLoadBalancer, step.ParamDisableAPIServerFloatIP} {
		if flags[i], err = p.Bool(key); err != nil {
			return spec, s.paramError(err)
		}
	}
	spec = infrav1.OpenStackClusterSpec{
		Network:                    networkParam(byID, network),
		DisableExternalNetwork:     ptr.To(flags[0]),
		APIServerLoadBalancer:      &infrav1.APIServerLoadBalancer{Enabled: ptr.To(flags[1])},
		DisableAPIServerFloatingIP: ptr.To(flags[2]),
		ManagedSecurityGroups:      securityGroups(s.inputs().SecurityGroups),
		IdentityRef:                *id,
	}
	if p.Get(step.ParamExternalNetwork) != "" {
		byID, external, err := p.Resource(step.ParamExternalNetwork)
		if err != nil {
			return spec, s.paramError(err)
		}
		spec.ExternalNetwork = networkParam(byID, external)
	}
	for _, r := range subnets {
		spec.Subnets = append(spec.Subnets, subnetParam(r))
	}
	if ip := p.Get(step.ParamAPIServerFixedIP); ip != "" {
		spec.APIServerFixedIP = ptr.To(ip)
	}
	if zone := p.Get(step.ParamControlPlaneZones); zone != "" {
		spec.ControlPlaneAvailabilityZones = []string{zone}
	}
	return spec, nil
}

// clusterEndpoint is the Cluster's control-plane endpoint, or the
// kubeconfig's while the Cluster has none.
func (e *Executor) clusterEndpoint(ctx context.Context, s *job) (clusterv1.APIEndpoint, error) {
	var c clusterv1.Cluster
	err := e.Client.Get(ctx, client.ObjectKey{Namespace: s.key.Namespace, Name: s.cluster()}, &c)
	switch {
	case err == nil && c.Spec.ControlPlaneEndpoint.IsValid():
		return c.Spec.ControlPlaneEndpoint, nil
	case err != nil && !apierrors.IsNotFound(err):
		return clusterv1.APIEndpoint{}, fmt.Errorf("read Cluster %s/%s: %w", s.key.Namespace, s.cluster(), err)
	}
	return e.endpoint(ctx, s)
}

// endpointIP is the endpoint's host when it is an IP address.
func endpointIP(ep clusterv1.APIEndpoint) *string {
	if net.ParseIP(ep.Host) == nil {
		return nil
	}
	return ptr.To(ep.Host)
}

// networkParam is a step's network (step.Resource) as CAPO's filter: by
// ID, or by name.
func networkParam(byID bool, value string) *infrav1.NetworkParam {
	if byID {
		return &infrav1.NetworkParam{ID: ptr.To(value)}
	}
	return &infrav1.NetworkParam{Filter: &infrav1.NetworkFilter{Name: value}}
}

// subnetParam is one of a step's subnets (step.Resources) as CAPO's filter.
func subnetParam(r step.ResourceRef) infrav1.SubnetParam {
	if r.ByID {
		return infrav1.SubnetParam{ID: ptr.To(r.Value)}
	}
	return infrav1.SubnetParam{Filter: &infrav1.SubnetFilter{Name: r.Value}}
}

// securityGroups: with spec.target.securityGroups, CAPO manages the
// cluster's security groups (the kubelet, etcd and API server rules) for
// the machines it creates, with the plan's extra rules on every node;
// without, none.
func securityGroups(sg *v1alpha1.SecurityGroups) *infrav1.ManagedSecurityGroups {
	if sg == nil {
		return nil
	}
	out := &infrav1.ManagedSecurityGroups{}
	out.AllowAllInClusterTraffic = sg.AllowAllInClusterTraffic
	for _, r := range sg.AllNodesRules {
		rule := infrav1.SecurityGroupRuleSpec{Name: r.Name, Direction: r.Direction}
		if r.Description != "" {
			rule.Description = ptr.To(r.Description)
		}
		if r.EtherType != "" {
			rule.EtherType = ptr.To(r.EtherType)
		}
		if r.Protocol != "" {
			rule.Protocol = ptr.To(r.Protocol)
		}
		if r.PortRangeMin != 0 {
			rule.PortRangeMin = ptr.To(r.PortRangeMin)
		}
		if r.PortRangeMax != 0 {
			rule.PortRangeMax = ptr.To(r.PortRangeMax)
		}
		for _, g := range r.RemoteManagedGroups {
			rule.RemoteManagedGroups = append(rule.RemoteManagedGroups, infrav1.ManagedSecurityGroupName(g))
		}
		out.AllNodesSecurityGroupRules = append(out.AllNodesSecurityGroupRules, rule)
	}
	return out
}
