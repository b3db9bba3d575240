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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/controlplane/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/testing/testenv"
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
	b := a.recordCloud(ctx, t)
	var err error
	if b.FrontProxyCA, err = a.frontProxyCA(ctx); err != nil {
		t.Fatalf("ostest: %v", err)
	}
	if b.KubeProxyImage, err = a.kubeProxyImage(ctx); err != nil {
		t.Fatalf("ostest: %v", err)
	}
	return b
}

// recordCloud records the project's servers with their security groups,
// and the ports on the cluster network.
func (a *Adoptable) recordCloud(ctx context.Context, t testenv.T) *Before {
	t.Helper()
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
	var checks checkList
	a.checkServers(ctx, before, &checks)
	a.checkMachines(ctx, &checks)
	a.checkRollouts(ctx, &checks)
	a.checkKept(ctx, before, &checks)
	a.checkPorts(ctx, before, &checks)
	a.checkEndpointSpec(ctx, &checks)
	return append(checks, a.CheckEndpoint(ctx))
}

// checkList collects the checks of Verify and ScaleUp in order.
type checkList []Check

// add appends a check, its detail formatted, and returns all so far.
func (l *checkList) add(name string, ok bool, format string, args ...any) []Check {
	*l = append(*l, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	return *l
}

// checkServers checks that the project has the same servers as before,
// each with the same security groups.
func (a *Adoptable) checkServers(ctx context.Context, before *Before, checks *checkList) {
	servers, err := a.ProjectServers(ctx)
	if err != nil {
		checks.add("Nova servers unchanged", false, "%v", err)
		return
	}
	now := map[string][]string{}
	for _, s := range servers {
		now[s.ID] = securityGroups(s.SecurityGroups)
	}
	ids := slices.Sorted(maps.Keys(now))
	same := slices.Equal(ids, slices.Sorted(maps.Keys(before.Servers)))
	checks.add("Nova servers unchanged", same, "%s", sameText(same, fmt.Sprintf("the same %d IDs before and after", len(now)),
		fmt.Sprintf("%d IDs before, %d after; created (+) or deleted (-): %s", len(before.Servers), len(now), strings.Join(diff(before.Servers, now), ", "))))
	var changed []string
	for id, groups := range before.Servers {
		if g, ok := now[id]; ok && !slices.Equal(g, groups) {
			changed = append(changed, fmt.Sprintf("%s: %v -> %v", id, groups, g))
		}
	}
	checks.add("security groups unchanged", len(changed) == 0, "%s", sameText(len(changed) == 0, "every server keeps its groups", strings.Join(changed, "; ")))
}

// checkMachines checks that every node has its Machine, Running with a
// Node, and that no other Machine was made.
func (a *Adoptable) checkMachines(ctx context.Context, checks *checkList) {
	var machines clusterv1.MachineList
	if err := a.Mgmt.Client.List(ctx, &machines, client.InNamespace("default"), client.MatchingLabels{clusterv1.ClusterNameLabel: a.Name}); err != nil {
		checks.add("Machines Running with a Node", false, "%v", err)
		return
	}
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
	checks.add("Machines Running with a Node", len(bad) == 0 && len(machines.Items) == len(nodes),
		"%d Machines for %d nodes%s", len(machines.Items), len(nodes), sameText(len(bad) == 0, ", each with its nodeRef, set by the Machine controller", "; not yet: "+strings.Join(bad, ", ")))
	checks.add("no Machine created", len(extra) == 0, "%s", sameText(len(extra) == 0, "only the adopted Machines exist", "new: "+strings.Join(extra, ", ")))
}

// checkRollouts checks that the control plane and every pool are ready
// at their current generation: nothing is rolling out.
func (a *Adoptable) checkRollouts(ctx context.Context, checks *checkList) {
	var kcps controlplanev1.KubeadmControlPlaneList
	if err := a.Mgmt.Client.List(ctx, &kcps, client.InNamespace("default")); err != nil || len(kcps.Items) != 1 {
		checks.add("KubeadmControlPlane ready", false, "%d found, %v", len(kcps.Items), err)
	} else {
		k := kcps.Items[0]
		n := *k.Spec.Replicas
		ok := k.Status.ObservedGeneration == k.Generation && k.Status.ReadyReplicas == n && k.Status.UpdatedReplicas == n && k.Status.Replicas == n
		checks.add("KubeadmControlPlane ready", ok, "%d/%d ready, %d updated, generation %d observed %d", k.Status.ReadyReplicas, n, k.Status.UpdatedReplicas, k.Generation, k.Status.ObservedGeneration)
	}
	a.checkMachineDeployments(ctx, checks)
}

// checkMachineDeployments checks that every MachineDeployment is ready at
// its current generation.
func (a *Adoptable) checkMachineDeployments(ctx context.Context, checks *checkList) {
	var mds clusterv1.MachineDeploymentList
	if err := a.Mgmt.Client.List(ctx, &mds, client.InNamespace("default")); err != nil || len(mds.Items) == 0 {
		checks.add("MachineDeployments ready", false, "%d found, %v", len(mds.Items), err)
	}
	for _, d := range mds.Items {
		n := *d.Spec.Replicas
		ok := d.Status.ObservedGeneration == d.Generation && d.Status.ReadyReplicas == n && d.Status.UpdatedReplicas == n && d.Status.Replicas == n
		checks.add("MachineDeployment "+d.Name+" ready", ok, "%d/%d ready, %d updated, generation %d observed %d", d.Status.ReadyReplicas, n, d.Status.UpdatedReplicas, d.Generation, d.Status.ObservedGeneration)
	}
}

// checkKept checks that the front-proxy CA and kube-proxy's image are
// those recorded before.
func (a *Adoptable) checkKept(ctx context.Context, before *Before, checks *checkList) {
	if ca, err := a.frontProxyCA(ctx); err != nil {
		checks.add("front-proxy CA unchanged", false, "%v", err)
	} else {
		checks.add("front-proxy CA unchanged", bytes.Equal(ca, before.FrontProxyCA), "%s", sameText(bytes.Equal(ca, before.FrontProxyCA), "the same certificate", "a new certificate was generated"))
	}
	if img, err := a.kubeProxyImage(ctx); err != nil {
		checks.add("kube-proxy image unchanged", false, "%v", err)
	} else {
		checks.add("kube-proxy image unchanged", img == before.KubeProxyImage, "%s (was %s)", img, before.KubeProxyImage)
	}
}

// checkPorts checks that every port made since before is attached.
func (a *Adoptable) checkPorts(ctx context.Context, before *Before, checks *checkList) {
	ports, err := a.ProjectPorts(ctx)
	if err != nil {
		checks.add("no stray port", false, "%v", err)
		return
	}
	var stray []string
	for _, p := range ports {
		if !before.Ports[p.ID] && p.DeviceID == "" {
			stray = append(stray, p.Name+" ("+p.ID+")")
		}
	}
	checks.add("no stray port", len(stray) == 0, "%s", sameText(len(stray) == 0, fmt.Sprintf("%d ports on the network, every new one attached", len(ports)), "unattached: "+strings.Join(stray, ", ")))
}

// checkEndpointSpec checks that the OpenStackCluster keeps the endpoint on
// its floating IP, without a load balancer.
func (a *Adoptable) checkEndpointSpec(ctx context.Context, checks *checkList) {
	var osc infrav1.OpenStackCluster
	if err := a.Mgmt.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: a.Name}, &osc); err != nil {
		checks.add("OpenStackCluster keeps the endpoint", false, "%v", err)
		return
	}
	ep, fip := osc.Spec.ControlPlaneEndpoint, ptrString(osc.Spec.APIServerFloatingIP)
	ok := ep != nil && ep.Host == a.Endpoint && fip == a.Endpoint && !ptrBool(osc.Spec.APIServerLoadBalancer.Enabled)
	checks.add("OpenStackCluster keeps the endpoint", ok, "endpoint %v, apiServerFloatingIP %q (so that deleting a control-plane machine keeps it), load balancer off", ep, fip)
}

func ptrBool(p *bool) bool { return p != nil && *p }

// VerifyUntil runs Verify no earlier than a minute after unpaused (the
// last unpause: a rollout would have begun by then), and again until
// every check holds or wait has passed, for the conditions the controllers
// are still moving towards. It returns the last checks.
func (a *Adoptable) VerifyUntil(ctx context.Context, before *Before, unpaused time.Time, wait time.Duration) []Check {
	return verifyUntil(ctx, unpaused, wait, func() []Check { return a.Verify(ctx, before) })
}

// verifyUntil runs verify no earlier than a minute after unpaused, and
// again until every check holds or wait has passed; it returns the last
// checks.
func verifyUntil(ctx context.Context, unpaused time.Time, wait time.Duration, verify func() []Check) []Check {
	sleep(ctx, time.Until(unpaused.Add(time.Minute)))
	deadline := time.Now().Add(wait)
	for {
		checks := verify()
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
