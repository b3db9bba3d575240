//go:build openstack

package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/testing/ostest"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// createHeld runs a db Deployment of one replica that prefers node, under
// a budget that allows no disruption.
func createHeld(ctx context.Context, t *testing.T, wl *testenv.Kube, node string) {
	t.Helper()
	labels := map[string]string{"app": "db"}
	prefer := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
		Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}
	objs := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: dbPod(prefer)}}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"}, Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(0)), Selector: &metav1.LabelSelector{MatchLabels: labels}}},
	}
	for _, o := range objs {
		if err := wl.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for ctx.Err() == nil {
		pods, err := wl.Pods(ctx, "default", labels, testenv.Serving)
		if err == nil && len(pods) == 1 && pods[0].Spec.NodeName == node {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("the db pod never served on %s: %v", node, ctx.Err())
}

// dbPod is the db's pod: the test server, preferring a node.
func dbPod(prefer *corev1.Affinity) corev1.PodSpec {
	spec := testenv.TestAppPod([]string{"serve"}, 8080)
	spec.Affinity = prefer
	return spec
}

// drained reports whether every node is cordoned and runs nothing but
// DaemonSet pods.
func drained(ctx context.Context, wl *testenv.Kube, nodes []string) bool {
	for _, name := range nodes {
		if cordoned, toEvict, err := wl.DrainState(ctx, name); err != nil || !cordoned || toEvict > 0 {
			return false
		}
	}
	return true
}

// checkBridgeKept checks that network-bridge stayed done once the
// infrastructure moved: its latest status on each merge commit of
// workers, cutover and cleanup is success, though the new nodes joined
// with no VPN client pod yet.
func checkBridgeKept(t *testing.T, m *migration, st *status.PlanStatus) {
	t.Helper()
	later := map[string]string{}
	for _, a := range st.ApprovedBy {
		if a.Phase == "workers" || a.Phase == "cutover" || a.Phase == "cleanup" {
			later[a.Commit] = a.Phase
		}
	}
	seen := 0
	for sha, phase := range later {
		for _, s := range m.gt.Statuses(t, sha) {
			if s.Context == "ferry/"+st.Plan+"/network-bridge" {
				seen++
				if s.Status != forge.StateSuccess {
					t.Errorf("network-bridge reopened after %s was approved: commit status %s (%s)", phase, s.Status, s.Description)
				}
			}
		}
	}
	if seen < len(later) || len(later) != 3 {
		t.Errorf("network-bridge statuses on the later merge commits: %d on %d commits (%v); want at least one on each of 3", seen, len(later), later)
	}
}

// checkCleanedUp checks the world after cleanup: the old pool and its
// Machines are gone, and so are the old nodes; the new servers are
// ACTIVE; the project's servers that ferry did not create are still there.
func checkCleanedUp(ctx context.Context, t *testing.T, f *ostest.Replaceable) {
	t.Helper()
	var machines clusterv1.MachineList
	if err := f.Mgmt.Client.List(ctx, &machines, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	newIDs := map[string]bool{}
	for _, m := range machines.Items {
		if m.Labels[clusterv1.MachineDeploymentNameLabel] == f.OldMD {
			t.Errorf("Machine %s of the old pool is still there", m.Name)
		}
		if id := ptr.Deref(m.Spec.ProviderID, ""); strings.HasPrefix(id, "openstack:///") {
			newIDs[strings.TrimPrefix(id, "openstack:///")] = true
		}
	}
	var md clusterv1.MachineDeployment
	if err := f.Mgmt.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: f.OldMD}, &md); !apierrors.IsNotFound(err) {
		t.Errorf("old MachineDeployment %s: %v; want it deleted", f.OldMD, err)
	}
	for _, name := range f.OldNodes {
		var n corev1.Node
		if err := f.Workload.Client.Get(ctx, client.ObjectKey{Name: name}, &n); !apierrors.IsNotFound(err) {
			t.Errorf("old Node %s: %v; want it deleted", name, err)
		}
	}
	servers, err := f.ProjectServers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	active := map[string]bool{}
	for _, s := range servers {
		active[s.ID] = s.Status == "ACTIVE"
	}
	if len(newIDs) != 3 {
		t.Errorf("%d Machines on OpenStack, want 3", len(newIDs))
	}
	for id := range newIDs {
		if !active[id] {
			t.Errorf("new server %s is not ACTIVE in Nova", id)
		}
	}
	for name, id := range f.Servers {
		if !active[id] {
			t.Errorf("server %s (%s), which ferry did not create, is gone or not ACTIVE", name, id)
		}
	}
}

// checkDaemonSet waits until DaemonSet name in kube-system has a Running,
// Ready pod on each of want nodes.
func checkDaemonSet(ctx context.Context, t *testing.T, wl *testenv.Kube, name string, want int) {
	t.Helper()
	var ds appsv1.DaemonSet
	for ctx.Err() == nil {
		if err := wl.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: name}, &ds); err == nil &&
			ds.Status.DesiredNumberScheduled == int32(want) && ds.Status.NumberReady == int32(want) {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Errorf("DaemonSet %s: %d of %d pods ready, want %d", name, ds.Status.NumberReady, ds.Status.DesiredNumberScheduled, want)
}

// gatewayWatch follows the gateway's servers in Nova (named with prefix)
// every half second: which are ACTIVE, and the fewest ACTIVE at once
// since the first was.
type gatewayWatch struct {
	mu     sync.Mutex
	active map[string]string // server ID -> flavor ID
	least  int
	frozen bool
	done   chan struct{}
	cancel context.CancelFunc
	ctx    context.Context
}

// watchGateway starts following the project's servers named with prefix
// until the test ends.
func watchGateway(ctx context.Context, t *testing.T, f *ostest.Replaceable, prefix string) *gatewayWatch {
	w := &gatewayWatch{least: -1, done: make(chan struct{})}
	w.ctx, w.cancel = context.WithCancel(ctx)
	go func() {
		defer close(w.done)
		for w.ctx.Err() == nil {
			if servers, err := f.ProjectServers(w.ctx); err == nil {
				active := map[string]string{}
				for _, s := range servers {
					if strings.HasPrefix(s.Name, prefix) && s.Status == "ACTIVE" {
						active[s.ID], _ = s.Flavor["id"].(string)
					}
				}
				w.mu.Lock()
				w.active = active
				switch {
				case w.frozen:
				case w.least < 0 && len(active) > 0:
					w.least = len(active)
				case w.least >= 0:
					w.least = min(w.least, len(active))
				}
				w.mu.Unlock()
			}
			time.Sleep(500 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { w.cancel(); <-w.done })
	return w
}

// waitOne waits until the one ACTIVE gateway server has flavor, and
// returns its ID.
func (w *gatewayWatch) waitOne(t *testing.T, flavor string) string {
	t.Helper()
	for w.ctx.Err() == nil {
		w.mu.Lock()
		active := w.active
		w.mu.Unlock()
		for id, f := range active {
			if len(active) == 1 && f == flavor {
				return id
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("no single ACTIVE gateway server of flavor %s: %v", flavor, w.ctx.Err())
	return ""
}

// waitNone waits until no gateway server is ACTIVE.
func (w *gatewayWatch) waitNone(t *testing.T) {
	t.Helper()
	for w.ctx.Err() == nil {
		w.mu.Lock()
		n := len(w.active)
		w.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Errorf("gateway servers still ACTIVE after cleanup: %v", w.ctx.Err())
}

// freeze ends the count of the fewest ACTIVE gateway servers (before
// cleanup, which deletes them) and returns it.
func (w *gatewayWatch) freeze() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.frozen = true
	return w.least
}
