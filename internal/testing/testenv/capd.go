package testenv

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DockerProviderID is the provider ID prefix of CAPD's machines.
const DockerProviderID = "docker:///"

// StartDockerStandIn runs a STAND-IN for the controller of Cluster API's
// Docker provider (CAPD) against mgmt until the test ends: it needs a
// Docker engine, which these machines lack. It plays CAPD's part and the
// containers' boot, nothing more: a DockerCluster reports ready; a
// DockerMachine gets the provider ID docker:///<name> and reports ready,
// and its "container" joins the workload cluster as a node of nodes (a
// hollow kubelet of RunNodes or a real one of RealNodes.On) named like it,
// carrying that provider ID. Everything
// else (MachineSets, Machines, bootstrap data, nodeRefs) is the real
// Cluster API controllers' work. When a DockerMachine is gone, its
// node's kubelet stops. Each change is logged, marked as a stand-in's.
func StartDockerStandIn(t T, mgmt *Kube, nodes NodePool) {
	t.Helper()
	joined := map[string]bool{} // only the poll's goroutine touches it
	Poll(t, 500*time.Millisecond, func(ctx context.Context) { dockerPass(ctx, t, mgmt.Client, nodes, joined) })
}

func dockerList(kind string) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta1", Kind: kind + "List"})
	return l
}

// dockerPass moves each DockerCluster and DockerMachine once; joined
// remembers the machines whose node was started.
func dockerPass(ctx context.Context, t T, c client.Client, nodes NodePool, joined map[string]bool) {
	logf := func(format string, args ...any) {
		t.Logf("stand-in CAPD controller (not the real one): "+format, args...)
	}
	clusters := dockerList("DockerCluster")
	if c.List(ctx, clusters) == nil {
		for i := range clusters.Items {
			u := &clusters.Items[i]
			if ready, _, _ := unstructured.NestedBool(u.Object, "status", "ready"); !ready {
				_ = unstructured.SetNestedField(u.Object, true, "status", "ready")
				if c.Status().Update(ctx, u) == nil {
					logf("DockerCluster %s/%s is ready", u.GetNamespace(), u.GetName())
				}
			}
		}
	}
	machines := dockerList("DockerMachine")
	if c.List(ctx, machines) != nil {
		return
	}
	present := map[string]bool{}
	for i := range machines.Items {
		present[machines.Items[i].GetName()] = true
	}
	for name := range joined {
		if !present[name] { // deleted: its container is gone
			nodes.StopNode(name)
			delete(joined, name)
			logf("DockerMachine %s is gone; its node's kubelet stopped", name)
		}
	}
	for i := range machines.Items {
		u := &machines.Items[i]
		if u.GetDeletionTimestamp() != nil {
			continue
		}
		if err := dockerMachine(ctx, t, c, nodes, u, joined); err != nil && ctx.Err() == nil && !apierrors.IsConflict(err) {
			logf("DockerMachine %s/%s: %v", u.GetNamespace(), u.GetName(), err)
		} else if err == nil && !joined[u.GetName()] {
			joined[u.GetName()] = true
			logf("DockerMachine %s/%s is ready; its node joined (%s)", u.GetNamespace(), u.GetName(), nodes.Kind())
		}
	}
}

// dockerMachine sets m's provider ID, starts its node and reports it
// ready, each once.
func dockerMachine(ctx context.Context, t T, c client.Client, nodes NodePool, m *unstructured.Unstructured, joined map[string]bool) error {
	id := DockerProviderID + m.GetName()
	if got, _, _ := unstructured.NestedString(m.Object, "spec", "providerID"); got == "" {
		_ = unstructured.SetNestedField(m.Object, id, "spec", "providerID")
		if err := c.Update(ctx, m); err != nil {
			return err
		}
	}
	if !joined[m.GetName()] {
		if err := nodes.AddNode(ctx, t, Node{Name: m.GetName(), ProviderID: id}); err != nil {
			return err
		}
	}
	if ready, _, _ := unstructured.NestedBool(m.Object, "status", "ready"); ready {
		return nil
	}
	_ = unstructured.SetNestedField(m.Object, true, "status", "ready")
	return c.Status().Update(ctx, m)
}
