package workload

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/observer"
	"github.com/ferry-dev/ferry/internal/step"
)

// drainPod is a pod on a test node. Owner is ReplicaSet, DaemonSet or
// empty (a bare pod).
type drainPod struct {
	name, owner, node string
	emptyDir          bool
	labels            map[string]string
}

// testWorkloadDrain drains each case's node twice; both runs must end the
// same way, and the world must look as the case says. The kubelet
// stand-in marks the fixture's pods Running and Ready and finishes their
// termination. PodDisruptionBudgets, which need the disruption controller
// and pods that really run, are drained in TestDrainRunningNodes.
func testWorkloadDrain(t *testing.T, env *testEnv) {
	cases := []struct {
		name, node string
		pods       []drainPod
		timeout    string
		// reports of the first and second run, or the error both runs give.
		reports      [2]string
		wantErr      []string
		terminal     bool
		gone, remain []string
	}{{
		name: "evicts pods, emptyDir too, not DaemonSet pods",
		node: "wl-drain",
		pods: []drainPod{
			{name: "web-1", owner: "ReplicaSet"},
			{name: "cache-1", owner: "ReplicaSet", emptyDir: true},
			{name: "agent-1", owner: "DaemonSet"},
		},
		timeout: "1m",
		reports: [2]string{
			"drained Node wl-drain: evicted 2 pods (wl-drain/cache-1, wl-drain/web-1)",
			"Node wl-drain cordoned, no pods to evict",
		},
		gone:   []string{"web-1", "cache-1"},
		remain: []string{"agent-1"},
	}, {
		name: "a pod with no controller stops the drain before any eviction",
		node: "wl-drain-bare",
		pods: []drainPod{
			{name: "debug", owner: ""},
			{name: "web-2", owner: "ReplicaSet"},
		},
		timeout:  "1m",
		wantErr:  []string{"drain Node wl-drain-bare: cannot delete Pods that declare no controller: wl-drain-bare/debug", "give them a controller"},
		terminal: true,
		remain:   []string{"debug", "web-2"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			ns := tc.node // one namespace per case, named after its node
			env.drainFixture(t, ns, tc.node, tc.pods)
			step := stepEvent(step.Drain, step.Target{Kind: step.Node, Name: tc.node},
				map[string]string{"timeout": tc.timeout, "respect": "PodDisruptionBudgets", "ignore": "DaemonSets"})
			for run := 0; run < 2; run++ {
				rep, err := env.exec.Execute(ctx, step)
				t.Logf("run %d: report %q, error: %v", run+1, rep.Message, err)
				checkWorkloadErr(t, err, tc.wantErr, tc.terminal)
				if len(tc.wantErr) == 0 && rep.Message != tc.reports[run] {
					t.Errorf("run %d: report %q, want %q", run+1, rep.Message, tc.reports[run])
				}
			}

			if n := env.node(t, tc.node); n == nil || !n.Spec.Unschedulable {
				t.Errorf("Node %s not cordoned", tc.node)
			}
			for _, name := range tc.gone {
				if env.podExists(t, ns, name) {
					t.Errorf("pod %s/%s still exists, want it evicted", ns, name)
				}
			}
			for _, name := range tc.remain {
				if !env.podExists(t, ns, name) {
					t.Errorf("pod %s/%s is gone, want it kept", ns, name)
				}
			}
			if len(tc.wantErr) > 0 {
				return
			}
			// The planner's done condition, read by the observer: cordoned
			// with nothing to evict.
			o := &observer.Observer{Client: env.mgmt.Client}
			s, err := o.Observe(ctx, testPlan(nil), observed.Record{})
			if err != nil {
				t.Fatal(err)
			}
			if n := s.Node(tc.node); n == nil || !n.Unschedulable || n.PodsToEvict != 0 {
				t.Errorf("observed node %+v (workload error %q); want cordoned with no pods to evict", n, s.WorkloadError)
			}
		})
	}
}

// drainFixture creates a namespace and the pods of a case, Running and
// Ready. A DaemonSet-owned pod's DaemonSet exists (the drain looks it up);
// a ReplicaSet owner need not (no garbage collector runs here).
func (env *testEnv) drainFixture(t *testing.T, ns, node string, pods []drainPod) {
	t.Helper()
	ctx := context.Background()
	c := env.wl.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	var ds *appsv1.DaemonSet
	for _, dp := range pods {
		var owners []metav1.OwnerReference
		switch dp.owner {
		case "ReplicaSet":
			owners = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "3f0c2f3e-0000-4000-8000-000000000001", Controller: ptr.To(true)}}
		case "DaemonSet":
			if ds == nil {
				ds = &appsv1.DaemonSet{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
					Spec: appsv1.DaemonSetSpec{
						Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
						Template: corev1.PodTemplateSpec{
							ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
							Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent"}}},
						},
					},
				}
				if err := c.Create(ctx, ds); err != nil {
					t.Fatal(err)
				}
			}
			owners = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: ptr.To(true)}}
		}
		on := dp.node
		if on == "" {
			on = node
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: dp.name, Labels: dp.labels, OwnerReferences: owners},
			Spec: corev1.PodSpec{
				NodeName:   on,
				Containers: []corev1.Container{{Name: "app", Image: "app"}},
			},
		}
		if dp.emptyDir {
			pod.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		env.kubelet.MarkRunning(t, ns, dp.name)
	}
}

func (env *testEnv) podExists(t *testing.T, ns, name string) bool {
	t.Helper()
	err := env.wl.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}
