// ScaleUp: one more machine in an adopted pool, built by the real
// controllers, with a stand-in for the kubelet the server does not run.

package ostest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ScaleUp adds one machine to the MachineDeployment md and checks that the
// real controllers build it: the kubeadm bootstrap controller its data,
// CAPO a new Nova server from the pool's flavor and image that reaches
// ACTIVE. Nova's fake driver boots nothing: on a fixture with real nodes
// (NewAdoptableOn) a real kubelet starts for the server on the servers'
// network with the Machine's provider ID, as a cloud image's kubelet
// would; otherwise the function plays that part, a STAND-IN, creating a
// Ready Node with it. Then it checks that the Machine controller binds
// the Node and the MachineDeployment counts it ready.
func (a *Adoptable) ScaleUp(ctx context.Context, md string) []Check {
	var checks checkList
	want, err := a.scale(ctx, md)
	if err != nil {
		return checks.add("scale-up", false, "%v", err)
	}
	m, last := a.newMachine(ctx, md)
	if m == nil {
		return checks.add("new server built by CAPO", false, "%v (last: %s)", ctx.Err(), last)
	}
	id := strings.TrimPrefix(*m.Spec.ProviderID, step.ProviderIDPrefix)
	srv, err := serverDetails(ctx, a.admin.Compute, id)
	if err != nil {
		return checks.add("new server built by CAPO", false, "%v", err)
	}
	checks.add("new server built by CAPO", srv.Status == "ACTIVE" && srv.FlavorID == a.FlavorID && srv.ImageID == a.ImageID,
		"server %s (%s) is %s, flavor %s (plan: %s), image %s (plan: %s)", srv.Name, id, srv.Status, srv.FlavorID, a.FlavorID, srv.ImageID, a.ImageID)
	if a.Nodes != nil {
		// The new server's kubelet, with the provider ID a cloud's image
		// gives it.
		if err := a.Nodes.On(a.ServerNet).AddNode(ctx, nil, testenv.Node{Name: m.Name, ProviderID: *m.Spec.ProviderID}); err != nil {
			return checks.add("new Machine Running", false, "its real node: %v", err)
		}
	} else if err := a.standInKubelet(ctx, m); err != nil {
		return checks.add("new Machine Running", false, "stand-in kubelet: %v", err)
	}
	return a.waitRunning(ctx, &checks, m, md, want, last)
}

// scale adds one replica to the MachineDeployment md and returns the new
// count.
func (a *Adoptable) scale(ctx context.Context, md string) (int32, error) {
	c := a.Mgmt.Client
	var d clusterv1.MachineDeployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: md}, &d); err != nil {
		return 0, err
	}
	want := *d.Spec.Replicas + 1
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = &want
	if err := c.Patch(ctx, &d, patch); err != nil {
		return 0, fmt.Errorf("scale %s to %d: %w", md, want, err)
	}
	return want, nil
}

// newMachine waits, until ctx ends, for a Machine of md that is not one of
// the adopted ones and has a provider ID: CAPO built its server. It
// returns nil and what it saw last when none came.
func (a *Adoptable) newMachine(ctx context.Context, md string) (*clusterv1.Machine, string) {
	c := a.Mgmt.Client
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
	return m, last
}

// standInKubelet plays the kubelet's part for m's server, which runs
// none: it registers a Node with the Machine's provider ID and marks it
// Ready.
func (a *Adoptable) standInKubelet(ctx context.Context, m *clusterv1.Machine) error {
	node := &corev1.Node{}
	node.Name = m.Name
	node.Labels = map[string]string{"kubernetes.io/hostname": m.Name, "kubernetes.io/os": "linux"}
	node.Spec.ProviderID = *m.Spec.ProviderID
	if err := a.Workload.Client.Create(ctx, node); err != nil {
		return fmt.Errorf("register Node %s: %w", m.Name, err)
	}
	// The Machine controller annotates the Node as soon as it sees it: read
	// it again on a conflict, as a kubelet does.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := a.Workload.Client.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
			return err
		}
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
		node.Status.NodeInfo.KubeletVersion = ptrString(m.Spec.Version)
		return a.Workload.Client.Status().Update(ctx, node)
	})
	if err != nil {
		return fmt.Errorf("mark Node %s Ready: %w", m.Name, err)
	}
	return nil
}

// waitRunning waits, until ctx ends, for the Machine controller to bind m
// to its Node and md to count want replicas ready; last is what was seen
// before, for the check's detail when that never happens.
func (a *Adoptable) waitRunning(ctx context.Context, checks *checkList, m *clusterv1.Machine, md string, want int32, last string) []Check {
	c := a.Mgmt.Client
	for ctx.Err() == nil {
		var got clusterv1.Machine
		err := c.Get(ctx, client.ObjectKeyFromObject(m), &got)
		if err == nil {
			last = fmt.Sprintf("phase %q, nodeRef %v", got.Status.Phase, got.Status.NodeRef != nil)
			var d clusterv1.MachineDeployment
			if got.Status.NodeRef != nil && got.Status.Phase == string(clusterv1.MachinePhaseRunning) &&
				c.Get(ctx, client.ObjectKey{Namespace: "default", Name: md}, &d) == nil && d.Status.ReadyReplicas == want {
				return checks.add("new Machine Running", true, "Machine %s has Node %s; %s has %d/%d ready", m.Name, got.Status.NodeRef.Name, md, want, want)
			}
		}
		sleep(ctx, 2*time.Second)
	}
	return checks.add("new Machine Running", false, "Machine %s: %v (last: %s)", m.Name, ctx.Err(), last)
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
