package ostest

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/controlplane/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testenv"
)

// Before is what adopting the cluster must leave as it found it, recorded
// before the migration: the servers with their security groups, the ports
// that existed, the front-proxy CA and kube-proxy's image.
type Before struct {
	// Servers maps the project's server IDs to their security groups.
	Servers map[string][]string
	// Ports are the IDs of the ports on the cluster network.
	Ports          map[string]bool
	FrontProxyCA   []byte
	KubeProxyImage string
}

// Check is one condition an adoption must meet, and what was seen.
type Check struct {
	Name   string
	OK     bool
	Detail string
}

func (c Check) String() string {
	mark := "✓"
	if !c.OK {
		mark = "✗"
	}
	return fmt.Sprintf("%s %s: %s", mark, c.Name, c.Detail)
}

// Record reads what Verify compares against. Call it before the migration.
func (a *Adoptable) Record(t testenv.T) *Before {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := &Before{Servers: map[string][]string{}, Ports: map[string]bool{}}
	list, err := a.ProjectServers(ctx)
	if err != nil {
		t.Fatalf("ostest: %v", err)
	}
	for _, s := range list {
		b.Servers[s.ID] = securityGroups(s.SecurityGroups)
	}
	ports, err := a.ProjectPorts(ctx)
	if err != nil {
		t.Fatalf("ostest: %v", err)
	}
	for _, p := range ports {
		b.Ports[p.ID] = true
	}
	if b.FrontProxyCA, err = a.frontProxyCA(ctx); err != nil {
		t.Fatalf("ostest: %v", err)
	}
	if b.KubeProxyImage, err = a.kubeProxyImage(ctx); err != nil {
		t.Fatalf("ostest: %v", err)
	}
	return b
}

func securityGroups(groups []map[string]any) []string {
	var names []string
	for _, g := range groups {
		if n, ok := g["name"].(string); ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

func (a *Adoptable) frontProxyCA(ctx context.Context) ([]byte, error) {
	var s corev1.Secret
	if err := a.Mgmt.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: a.Name + "-proxy"}, &s); err != nil {
		return nil, fmt.Errorf("read the front-proxy CA: %w", err)
	}
	return s.Data["tls.crt"], nil
}

func (a *Adoptable) kubeProxyImage(ctx context.Context) (string, error) {
	var ds appsv1.DaemonSet
	if err := a.Workload.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kube-proxy"}, &ds); err != nil {
		return "", fmt.Errorf("read kube-proxy: %w", err)
	}
	return ds.Spec.Template.Spec.Containers[0].Image, nil
}

// Verify checks the adopted cluster against before, as the real Cluster
// API and CAPO controllers left it: the same servers with the same
// security groups, every Machine with its Node and Running, the control
// plane and every pool ready at their current generation, no Machine but
// the adopted ones, the front-proxy CA and kube-proxy's image as they
// were, no port left unattached that was not there before, and the
// endpoint's floating IP kept and answering.
func (a *Adoptable) Verify(ctx context.Context, before *Before) []Check {
	var checks []Check
	add := func(name string, ok bool, format string, args ...any) {
		checks = append(checks, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	}

	servers, err := a.ProjectServers(ctx)
	if err != nil {
		add("Nova servers unchanged", false, "%v", err)
	} else {
		now := map[string][]string{}
		for _, s := range servers {
			now[s.ID] = securityGroups(s.SecurityGroups)
		}
		ids := slices.Sorted(maps.Keys(now))
		same := slices.Equal(ids, slices.Sorted(maps.Keys(before.Servers)))
		add("Nova servers unchanged", same, "%s", sameText(same, fmt.Sprintf("the same %d IDs before and after", len(now)),
			fmt.Sprintf("%d IDs before, %d after; created (+) or deleted (-): %s", len(before.Servers), len(now), strings.Join(diff(before.Servers, now), ", "))))
		var changed []string
		for id, groups := range before.Servers {
			if g, ok := now[id]; ok && !slices.Equal(g, groups) {
				changed = append(changed, fmt.Sprintf("%s: %v -> %v", id, groups, g))
			}
		}
		add("security groups unchanged", len(changed) == 0, "%s", sameText(len(changed) == 0, "every server keeps its groups", strings.Join(changed, "; ")))
	}

	var machines clusterv1.MachineList
	if err := a.Mgmt.Client.List(ctx, &machines, client.InNamespace("default"), client.MatchingLabels{clusterv1.ClusterNameLabel: a.Name}); err != nil {
		add("Machines Running with a Node", false, "%v", err)
	} else {
		nodes := append(slices.Clone(a.ControlPlane), a.Workers...)
		var bad, extra []string
		for _, m := range machines.Items {
			if !slices.Contains(nodes, m.Name) {
				extra = append(extra, m.Name)
			}
			if m.Status.NodeRef == nil || m.Status.Phase != string(clusterv1.MachinePhaseRunning) {
				bad = append(bad, fmt.Sprintf("%s (phase %q, nodeRef %v)", m.Name, m.Status.Phase, m.Status.NodeRef != nil))
			}
		}
		add("Machines Running with a Node", len(bad) == 0 && len(machines.Items) == len(nodes),
			"%d Machines for %d nodes%s", len(machines.Items), len(nodes), sameText(len(bad) == 0, ", each with its nodeRef, set by the Machine controller", "; not yet: "+strings.Join(bad, ", ")))
		add("no Machine created", len(extra) == 0, "%s", sameText(len(extra) == 0, "only the adopted Machines exist", "new: "+strings.Join(extra, ", ")))
	}

	var kcps controlplanev1.KubeadmControlPlaneList
	if err := a.Mgmt.Client.List(ctx, &kcps, client.InNamespace("default")); err != nil || len(kcps.Items) != 1 {
		add("KubeadmControlPlane ready", false, "%d found, %v", len(kcps.Items), err)
	} else {
		k := kcps.Items[0]
		n := *k.Spec.Replicas
		ok := k.Status.ObservedGeneration == k.Generation && k.Status.ReadyReplicas == n && k.Status.UpdatedReplicas == n && k.Status.Replicas == n
		add("KubeadmControlPlane ready", ok, "%d/%d ready, %d updated, generation %d observed %d", k.Status.ReadyReplicas, n, k.Status.UpdatedReplicas, k.Generation, k.Status.ObservedGeneration)
	}
	var mds clusterv1.MachineDeploymentList
	if err := a.Mgmt.Client.List(ctx, &mds, client.InNamespace("default")); err != nil || len(mds.Items) == 0 {
		add("MachineDeployments ready", false, "%d found, %v", len(mds.Items), err)
	}
	for _, d := range mds.Items {
		n := *d.Spec.Replicas
		ok := d.Status.ObservedGeneration == d.Generation && d.Status.ReadyReplicas == n && d.Status.UpdatedReplicas == n && d.Status.Replicas == n
		add("MachineDeployment "+d.Name+" ready", ok, "%d/%d ready, %d updated, generation %d observed %d", d.Status.ReadyReplicas, n, d.Status.UpdatedReplicas, d.Generation, d.Status.ObservedGeneration)
	}

	if ca, err := a.frontProxyCA(ctx); err != nil {
		add("front-proxy CA unchanged", false, "%v", err)
	} else {
		add("front-proxy CA unchanged", bytes.Equal(ca, before.FrontProxyCA), "%s", sameText(bytes.Equal(ca, before.FrontProxyCA), "the same certificate", "a new certificate was generated"))
	}
	if img, err := a.kubeProxyImage(ctx); err != nil {
		add("kube-proxy image unchanged", false, "%v", err)
	} else {
		add("kube-proxy image unchanged", img == before.KubeProxyImage, "%s (was %s)", img, before.KubeProxyImage)
	}

	if ports, err := a.ProjectPorts(ctx); err != nil {
		add("no stray port", false, "%v", err)
	} else {
		var stray []string
		for _, p := range ports {
			if !before.Ports[p.ID] && p.DeviceID == "" {
				stray = append(stray, p.Name+" ("+p.ID+")")
			}
		}
		add("no stray port", len(stray) == 0, "%s", sameText(len(stray) == 0, fmt.Sprintf("%d ports on the network, every new one attached", len(ports)), "unattached: "+strings.Join(stray, ", ")))
	}

	var osc infrav1.OpenStackCluster
	if err := a.Mgmt.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: a.Name}, &osc); err != nil {
		add("OpenStackCluster keeps the endpoint", false, "%v", err)
	} else {
		ep, fip := osc.Spec.ControlPlaneEndpoint, ptrString(osc.Spec.APIServerFloatingIP)
		ok := ep != nil && ep.Host == a.Endpoint && fip == a.Endpoint && !ptrBool(osc.Spec.APIServerLoadBalancer.Enabled)
		add("OpenStackCluster keeps the endpoint", ok, "endpoint %v, apiServerFloatingIP %q (so that deleting a control-plane machine keeps it), load balancer off", ep, fip)
	}
	return append(checks, a.CheckEndpoint(ctx))
}

func ptrBool(p *bool) bool { return p != nil && *p }

// VerifyUntil runs Verify no earlier than a minute after unpaused (the
// last unpause: a rollout would have begun by then), and again until
// every check holds or wait has passed, for the conditions the controllers
// are still moving towards. It returns the last checks.
func (a *Adoptable) VerifyUntil(ctx context.Context, before *Before, unpaused time.Time, wait time.Duration) []Check {
	sleep(ctx, time.Until(unpaused.Add(time.Minute)))
	deadline := time.Now().Add(wait)
	for {
		checks := a.Verify(ctx, before)
		ok := true
		for _, c := range checks {
			ok = ok && c.OK
		}
		if ok || time.Now().After(deadline) || ctx.Err() != nil {
			return checks
		}
		sleep(ctx, 2*time.Second)
	}
}

func sameText(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}

// diff lists the keys in only one of a and b, marked - and +.
func diff(a, b map[string][]string) []string {
	var out []string
	for k := range a {
		if _, ok := b[k]; !ok {
			out = append(out, "-"+k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, "+"+k)
		}
	}
	sort.Strings(out)
	return out
}

// ScaleUp adds one machine to the MachineDeployment md and checks that the
// real controllers build it: the kubeadm bootstrap controller its data,
// CAPO a new Nova server from the pool's flavor and image that reaches
// ACTIVE. There is no kubelet to register the new server as a Node: the
// function plays that part, a STAND-IN, creating a Ready Node with the
// Machine's provider ID, and then checks that the Machine controller binds
// it and the MachineDeployment counts it ready.
func (a *Adoptable) ScaleUp(ctx context.Context, md string) []Check {
	var checks []Check
	add := func(name string, ok bool, format string, args ...any) []Check {
		checks = append(checks, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
		return checks
	}
	c := a.Mgmt.Client
	var d clusterv1.MachineDeployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: md}, &d); err != nil {
		return add("scale-up", false, "%v", err)
	}
	want := *d.Spec.Replicas + 1
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = &want
	if err := c.Patch(ctx, &d, patch); err != nil {
		return add("scale-up", false, "scale %s to %d: %v", md, want, err)
	}
	adopted := append(slices.Clone(a.ControlPlane), a.Workers...)
	var m *clusterv1.Machine
	last := "no new Machine yet"
	for m == nil && ctx.Err() == nil {
		var list clusterv1.MachineList
		if err := c.List(ctx, &list, client.InNamespace("default"), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md}); err == nil {
			for i := range list.Items {
				if n := &list.Items[i]; !slices.Contains(adopted, n.Name) {
					last = fmt.Sprintf("Machine %s, phase %s, providerID %q", n.Name, n.Status.Phase, ptrString(n.Spec.ProviderID))
					if ptrString(n.Spec.ProviderID) != "" {
						m = n
					}
				}
			}
		}
		sleep(ctx, 2*time.Second)
	}
	if m == nil {
		return add("new server built by CAPO", false, "%v (last: %s)", ctx.Err(), last)
	}
	id := strings.TrimPrefix(*m.Spec.ProviderID, step.ProviderIDPrefix)
	srv, err := serverDetails(ctx, a.admin.Compute, id)
	if err != nil {
		return add("new server built by CAPO", false, "%v", err)
	}
	add("new server built by CAPO", srv.Status == "ACTIVE" && srv.FlavorID == a.FlavorID && srv.ImageID == a.ImageID,
		"server %s (%s) is %s, flavor %s (plan: %s), image %s (plan: %s)", srv.Name, id, srv.Status, srv.FlavorID, a.FlavorID, srv.ImageID, a.ImageID)

	// The kubelet's part, played here (a stand-in): register the Node.
	node := &corev1.Node{}
	node.Name = m.Name
	node.Labels = map[string]string{"kubernetes.io/hostname": m.Name, "kubernetes.io/os": "linux"}
	node.Spec.ProviderID = *m.Spec.ProviderID
	if err := a.Workload.Client.Create(ctx, node); err != nil {
		return add("new Machine Running", false, "stand-in kubelet: register Node %s: %v", m.Name, err)
	}
	// The Machine controller annotates the Node as soon as it sees it: read
	// it again on a conflict, as a kubelet does.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := a.Workload.Client.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
			return err
		}
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
		node.Status.NodeInfo.KubeletVersion = ptrString(m.Spec.Version)
		return a.Workload.Client.Status().Update(ctx, node)
	})
	if err != nil {
		return add("new Machine Running", false, "stand-in kubelet: mark Node %s Ready: %v", m.Name, err)
	}
	for ctx.Err() == nil {
		var got clusterv1.Machine
		err := c.Get(ctx, client.ObjectKeyFromObject(m), &got)
		if err == nil {
			last = fmt.Sprintf("phase %q, nodeRef %v", got.Status.Phase, got.Status.NodeRef != nil)
			var d clusterv1.MachineDeployment
			if got.Status.NodeRef != nil && got.Status.Phase == string(clusterv1.MachinePhaseRunning) &&
				c.Get(ctx, client.ObjectKey{Namespace: "default", Name: md}, &d) == nil && d.Status.ReadyReplicas == want {
				return add("new Machine Running", true, "Machine %s has Node %s; %s has %d/%d ready", m.Name, got.Status.NodeRef.Name, md, want, want)
			}
		}
		sleep(ctx, 2*time.Second)
	}
	return add("new Machine Running", false, "Machine %s: %v (last: %s)", m.Name, ctx.Err(), last)
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

type serverDetail struct {
	Name, Status, FlavorID, ImageID string
}

// serverDetails reads a server's name, status, flavor and image IDs.
func serverDetails(ctx context.Context, c *gophercloud.ServiceClient, id string) (*serverDetail, error) {
	var s struct {
		Name   string         `json:"name"`
		Status string         `json:"status"`
		Flavor map[string]any `json:"flavor"`
		Image  map[string]any `json:"image"`
	}
	if err := servers.Get(ctx, c, id).ExtractInto(&s); err != nil {
		return nil, fmt.Errorf("get server %s: %w", id, err)
	}
	d := &serverDetail{Name: s.Name, Status: s.Status}
	d.FlavorID, _ = s.Flavor["id"].(string)
	d.ImageID, _ = s.Image["id"].(string)
	return d, nil
}
