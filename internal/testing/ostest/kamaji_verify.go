// Checks of a Hosted cluster after its migration: what the real Cluster
// API and CAPO controllers made of the objects ferry created, and seed
// 004's rules on them.

package ostest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/kube"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// CCMName is the name of the cloud controller manager's DaemonSet in
// testenv.CCMManifest.
const CCMName = "openstack-cloud-controller-manager"

// Record reads what Verify compares against: the servers with their
// security groups, the ports, kube-proxy's image. Call it before the
// migration.
func (h *Hosted) Record(t testenv.T) *Before {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := h.recordCloud(ctx, t)
	var err error
	if b.KubeProxyImage, err = h.kubeProxyImage(ctx); err != nil {
		t.Fatalf("ostest: %v", err)
	}
	return b
}

// Verify checks the migrated cluster against before: the Cluster on its
// OpenStackCluster, with both ready as the Cluster controller reads them;
// the same worker
// servers, ACTIVE, with the same security groups; a Machine per worker,
// Running with its Node, and no other; the MachineDeployment ready; no
// stray port; an OpenStackCluster that CAPO reports ready, without an API
// load balancer or floating IP, in its spec or in Neutron, and with the
// CNI's rules on the workers' security group; seed 004's rules on the
// KamajiControlPlane and the cloud controller manager; the endpoint kept.
func (h *Hosted) Verify(ctx context.Context, before *Before) []Check {
	var checks checkList
	h.checkCluster(ctx, &checks)
	h.checkServers(ctx, before, &checks)
	h.checkActive(ctx, &checks)
	h.checkMachines(ctx, &checks)
	h.checkMachineDeployments(ctx, &checks)
	h.checkPorts(ctx, before, &checks)
	h.checkOpenStackCluster(ctx, &checks)
	h.checkNoEndpointResources(ctx, &checks)
	h.checkKamajiRules(ctx, &checks)
	return append(checks, h.CheckEndpoint(ctx))
}

// VerifyUntil is Adoptable.VerifyUntil with Hosted's checks.
func (h *Hosted) VerifyUntil(ctx context.Context, before *Before, unpaused time.Time, wait time.Duration) []Check {
	return verifyUntil(ctx, unpaused, wait, func() []Check { return h.Verify(ctx, before) })
}

// checkCluster checks that the real Cluster controller reports the
// Cluster's infrastructure (now the OpenStackCluster) and its hosted
// control plane ready, the control plane initialized: it read the
// KamajiControlPlane through its contract.
func (h *Hosted) checkCluster(ctx context.Context, checks *checkList) {
	var cl clusterv1.Cluster
	if err := h.Mgmt.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: h.Name}, &cl); err != nil {
		checks.add("Cluster ready on OpenStack", false, "%v", err)
		return
	}
	infra := cl.Spec.InfrastructureRef
	onOpenStack := infra != nil && infra.Kind == "OpenStackCluster"
	initialized := slices.ContainsFunc(cl.Status.Conditions, func(c clusterv1.Condition) bool {
		return c.Type == clusterv1.ControlPlaneInitializedCondition && c.Status == corev1.ConditionTrue
	})
	checks.add("Cluster ready on OpenStack", onOpenStack && cl.Status.InfrastructureReady && cl.Status.ControlPlaneReady && initialized,
		"infrastructureRef OpenStackCluster %t, infrastructureReady %t, controlPlaneReady %t, ControlPlaneInitialized %t, phase %s (the Cluster controller's)",
		onOpenStack, cl.Status.InfrastructureReady, cl.Status.ControlPlaneReady, initialized, cl.Status.Phase)
}

// checkActive checks that every server of the project is ACTIVE.
func (h *Hosted) checkActive(ctx context.Context, checks *checkList) {
	list, err := h.ProjectServers(ctx)
	if err != nil {
		checks.add("Nova servers ACTIVE", false, "%v", err)
		return
	}
	var not []string
	for _, s := range list {
		if s.Status != "ACTIVE" {
			not = append(not, s.Name+" "+s.Status)
		}
	}
	checks.add("Nova servers ACTIVE", len(not) == 0 && len(list) == len(h.Workers), "%d servers for %d workers%s", len(list), len(h.Workers), sameText(len(not) == 0, "", "; not ACTIVE: "+strings.Join(not, ", ")))
}

// checkOpenStackCluster checks that CAPO reports the OpenStackCluster
// ready, that its spec asks for no API load balancer and no floating or
// fixed IP (Kamaji owns the endpoint, seed 004) and keeps the hosted
// endpoint, and that CAPO put the CNI's rules on the workers' group.
func (h *Hosted) checkOpenStackCluster(ctx context.Context, checks *checkList) {
	var osc infrav1.OpenStackCluster
	if err := h.Mgmt.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: h.Name}, &osc); err != nil {
		checks.add("OpenStackCluster ready", false, "%v", err)
		return
	}
	s := osc.Spec
	checks.add("OpenStackCluster ready", osc.Status.Ready && osc.Status.APIServerLoadBalancer == nil,
		"ready %t (set by CAPO), status.apiServerLoadBalancer %v, network %s", osc.Status.Ready, osc.Status.APIServerLoadBalancer, networkName(osc.Status.Network))
	lbOff := s.APIServerLoadBalancer == nil || !ptrBool(s.APIServerLoadBalancer.Enabled)
	fipOff := ptrBool(s.DisableAPIServerFloatingIP) && ptrString(s.APIServerFloatingIP) == "" && ptrString(s.APIServerFixedIP) == ""
	ep := s.ControlPlaneEndpoint
	epOK := ep != nil && *ep == h.ControlPlaneEndpoint
	checks.add("OpenStackCluster without API load balancer or floating IP", lbOff && fipOff && epOK,
		"apiServerLoadBalancer off %t, disableAPIServerFloatingIP %t, apiServerFloatingIP %q, apiServerFixedIP %q, endpoint %v (hosted API server %s:%d)",
		lbOff, ptrBool(s.DisableAPIServerFloatingIP), ptrString(s.APIServerFloatingIP), ptrString(s.APIServerFixedIP), ep, h.ControlPlaneEndpoint.Host, h.ControlPlaneEndpoint.Port)
	h.checkCNIRules(ctx, osc.Status.WorkerSecurityGroup, checks)
}

func networkName(n *infrav1.NetworkStatusWithSubnets) string {
	if n == nil {
		return "none"
	}
	return n.Name
}

// checkCNIRules checks that the workers' security group, which CAPO
// manages, admits Calico's BGP (tcp/179) and IP-in-IP (protocol 4) from
// its members.
func (h *Hosted) checkCNIRules(ctx context.Context, sg *infrav1.SecurityGroupStatus, checks *checkList) {
	const name = "workers' security group has the CNI's rules"
	if sg == nil {
		checks.add(name, false, "no worker security group in the OpenStackCluster's status")
		return
	}
	g, err := groups.Get(ctx, h.admin.Network, sg.ID).Extract()
	if err != nil {
		checks.add(name, false, "security group %s: %v", sg.Name, err)
		return
	}
	bgp, ipip := false, false
	for _, r := range g.Rules {
		member := r.Direction == "ingress" && r.RemoteGroupID == g.ID
		bgp = bgp || (member && r.Protocol == "tcp" && r.PortRangeMin == 179 && r.PortRangeMax == 179)
		ipip = ipip || (member && r.Protocol == "4")
	}
	checks.add(name, bgp && ipip, "group %s (%d rules): BGP tcp/179 from members %t, IP-in-IP from members %t", g.Name, len(g.Rules), bgp, ipip)
}

// checkNoEndpointResources checks in Neutron that nothing was made for an
// API endpoint: no floating IP in the project, no load balancer's port on
// the cluster network (the local cloud has no Octavia, so CAPO could not
// have made one without failing; this proves it did not try to).
func (h *Hosted) checkNoEndpointResources(ctx context.Context, checks *checkList) {
	fips, err := list(ctx, "floating IPs", floatingips.List(h.admin.Network, floatingips.ListOpts{ProjectID: h.ProjectID}), floatingips.ExtractFloatingIPs)
	if err != nil {
		checks.add("no floating IP or load balancer in Neutron", false, "%v", err)
		return
	}
	all, err := list(ctx, "ports", ports.List(h.admin.Network, ports.ListOpts{ProjectID: h.ProjectID}), ports.ExtractPorts)
	if err != nil {
		checks.add("no floating IP or load balancer in Neutron", false, "%v", err)
		return
	}
	var lb []string
	for _, p := range all {
		if strings.Contains(strings.ToLower(p.DeviceOwner), "loadbalancer") || strings.Contains(strings.ToLower(p.DeviceOwner), "octavia") {
			lb = append(lb, p.Name+" ("+p.DeviceOwner+")")
		}
	}
	var addrs []string
	for _, f := range fips {
		addrs = append(addrs, f.FloatingIP)
	}
	checks.add("no floating IP or load balancer in Neutron", len(fips) == 0 && len(lb) == 0,
		"%d floating IPs %v, %d load balancer ports %v in project %s", len(fips), addrs, len(lb), lb, h.ProjectID)
}

// checkKamajiRules checks seed 004's rules on what ferry changed: the
// KamajiControlPlane's kubelet address order, and the cloud controller
// manager applied to the workload cluster without a control-plane
// nodeSelector and tolerating node.cluster.x-k8s.io/uninitialized.
func (h *Hosted) checkKamajiRules(ctx context.Context, checks *checkList) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kube.KamajiGVK)
	if err := h.Mgmt.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: h.ControlPlaneName}, u); err != nil {
		checks.add("KamajiControlPlane kubelet preferredAddressTypes", false, "%v", err)
	} else {
		got, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "kubelet", "preferredAddressTypes")
		want := []string{"InternalIP", "ExternalIP", "Hostname"}
		checks.add("KamajiControlPlane kubelet preferredAddressTypes", slices.Equal(got, want), "%v (want %v)", got, want)
	}
	var ds appsv1.DaemonSet
	if err := h.Workload.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: CCMName}, &ds); err != nil {
		checks.add("cloud controller manager on the workers", false, "%v", err)
		return
	}
	spec := ds.Spec.Template.Spec
	_, cpSelector := spec.NodeSelector["node-role.kubernetes.io/control-plane"]
	tolerates := slices.ContainsFunc(spec.Tolerations, func(t corev1.Toleration) bool {
		return t.Key == "node.cluster.x-k8s.io/uninitialized" && t.Effect == corev1.TaintEffectNoSchedule
	})
	checks.add("cloud controller manager on the workers", !cpSelector && tolerates,
		"DaemonSet kube-system/%s: nodeSelector %v, tolerates node.cluster.x-k8s.io/uninitialized:NoSchedule %t", CCMName, spec.NodeSelector, tolerates)
}

// CheckEndpoint checks that the Cluster, now on its OpenStackCluster,
// keeps the hosted endpoint, and that the hosted API server answers there.
func (h *Hosted) CheckEndpoint(ctx context.Context) Check {
	c := Check{Name: "endpoint kept"}
	var cl clusterv1.Cluster
	if err := h.Mgmt.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: h.Name}, &cl); err != nil {
		c.Detail = err.Error()
		return c
	}
	if cl.Spec.ControlPlaneEndpoint != h.ControlPlaneEndpoint {
		c.Detail = fmt.Sprintf("the Cluster's endpoint is %v, not the hosted API server's %v", cl.Spec.ControlPlaneEndpoint, h.ControlPlaneEndpoint)
		return c
	}
	cs, err := kubernetes.NewForConfig(h.Workload.Config)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		c.Detail = fmt.Sprintf("%s does not answer: %v", h.Workload.Config.Host, err)
		return c
	}
	c.OK = true
	c.Detail = fmt.Sprintf("the Cluster's endpoint %s:%d answers /readyz %q", cl.Spec.ControlPlaneEndpoint.Host, cl.Spec.ControlPlaneEndpoint.Port, body)
	return c
}
