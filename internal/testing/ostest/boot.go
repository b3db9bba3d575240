// Boot: a STAND-IN for what a new server does when it boots, because the
// local Nova's servers run nothing.

package ostest

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Boot plays, until the test ends, the part of a new OpenStack server that
// no process here can: cloud-init running `kubeadm join` and the kubelet
// registering the node. The local Nova runs its servers on a fake
// hypervisor, so nothing inside them starts. Boot is a STAND-IN for that
// boot only: it watches the Machines in namespace of the management
// cluster and, for each that the real controllers built (CAPO set an
// openstack:/// provider ID once the Nova server was ACTIVE), starts a
// node of nodes (a hollow kubelet of testenv.RunNodes or a real one of
// RealNodes.On) named like the server, with that provider ID. What comes before (bootstrap
// data, the server) and after (the Machine's nodeRef, Running, the
// MachineDeployment's ready count) is the real controllers' work.
//
// It returns the names of the nodes it started so far, for checks.
func Boot(t testenv.T, mgmt *testenv.Kube, nodes testenv.NodePool, namespace string) func() []string {
	b := &booter{started: map[string]bool{}}
	testenv.Poll(t, time.Second, func(ctx context.Context) { b.pass(ctx, t, mgmt, nodes, namespace) })
	return b.names
}

type booter struct {
	mu      sync.Mutex
	started map[string]bool
	order   []string
}

func (b *booter) names() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.order...)
}

// pass starts a node for each built Machine that has none.
func (b *booter) pass(ctx context.Context, t testenv.T, mgmt *testenv.Kube, nodes testenv.NodePool, namespace string) {
	var machines clusterv1.MachineList
	if err := mgmt.Client.List(ctx, &machines, client.InNamespace(namespace)); err != nil {
		return
	}
	for _, m := range machines.Items {
		id := ptrString(m.Spec.ProviderID)
		name := m.Spec.InfrastructureRef.Name // CAPO names the server after its OpenStackMachine
		if !strings.HasPrefix(id, step.ProviderIDPrefix) || m.DeletionTimestamp != nil || b.isStarted(name) {
			continue
		}
		node := testenv.Node{Name: name, ProviderID: id}
		if _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; ok {
			node.Labels = map[string]string{"node-role.kubernetes.io/control-plane": ""}
		}
		// AddNode starts one node per name; called again after a
		// failure, it waits for that one.
		if err := nodes.AddNode(ctx, t, node); err != nil {
			if ctx.Err() == nil {
				t.Logf("ostest: boot stand-in: node %s of Machine %s: %v", name, m.Name, err)
			}
			continue
		}
		b.mu.Lock()
		b.started[name] = true
		b.order = append(b.order, name)
		b.mu.Unlock()
		t.Logf("ostest: boot stand-in: Machine %s's server %s joined as Node %s (%s)", m.Name, strings.TrimPrefix(id, step.ProviderIDPrefix), name, nodes.Kind())
	}
}

func (b *booter) isStarted(name string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.started[name]
}
