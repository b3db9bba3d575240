package workload

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/observer"
	"github.com/ferry-dev/ferry/internal/step"
)

const (
	ccmPath     = "manifests/openstack-cloud-controller-manager.yaml"
	overlayPath = "manifests/vpn-overlay.yaml"
)

// kubeadmCCM is the plan that has the CCM keep the manifest's
// scheduling, for the observer; kubeadmScheduling is what the planner
// gives its CCM's apply step. kamajiScheduling is seed 004's: no
// nodeSelector (no control-plane nodes) and the uninitialized
// tolerations, whole.
var (
	kubeadmCCM = func(p *v1alpha1.MigrationPlan) {
		p.Spec.Manifests = &v1alpha1.Manifests{
			CloudControllerManager: &v1alpha1.CloudControllerManager{Path: ccmPath},
			VPNOverlay:             []string{overlayPath},
		}
	}
	kubeadmScheduling = &step.Scheduling{}
	kamajiTolerations = []v1alpha1.Toleration{
		{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: "NoSchedule"},
		{Key: "node.cluster.x-k8s.io/uninitialized", Operator: "Exists", Effect: "NoSchedule"},
	}
	kamajiScheduling = &step.Scheduling{NodeSelector: map[string]string{}, Tolerations: kamajiTolerations}
)

// kamajiParams are the planner's parameters of kamajiScheduling's apply
// step, which the executor does not read.
var kamajiParams = map[string]string{
	step.ParamNodeSelector: step.NodeSelectorNone,
	step.ParamTolerations:  "node.cloudprovider.kubernetes.io/uninitialized:NoSchedule,node.cluster.x-k8s.io/uninitialized:NoSchedule",
}

// delivered is ev as an executor receives it from the stream: encoded and
// decoded as JSON.
func delivered(t *testing.T, ev *events.StepEvent) *events.StepEvent {
	t.Helper()
	data, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var out events.StepEvent
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// testWorkloadApply applies manifests in order against one cluster, each
// twice: the cases build on each other as a cluster's history does (the
// CCM applied for a kubeadm plan, then for a Kamaji one, then edited by
// hand).
func testWorkloadApply(t *testing.T, env *testEnv) {
	ctx := context.Background()
	c := env.wl.Client
	cases := []struct {
		name string
		// scheduling is the step's inputs' (the CCM's apply only).
		scheduling *step.Scheduling
		path       string
		// params are the step's, as the planner sets them.
		params map[string]string
		before func(t *testing.T)
		report string
		// wantErr holds what the error of both runs says; empty wants success.
		wantErr  []string
		terminal bool
		check    func(t *testing.T)
	}{{
		name:       "CCM of a kubeadm plan keeps the manifest's scheduling",
		scheduling: kubeadmScheduling,
		path:       ccmPath,
		report:     "applied 3 objects of " + ccmPath + " at 8f3c2a91d0e4 with the plan's scheduling (nodeSelector from the manifest)",
		check: func(t *testing.T) {
			ds := env.ccm(t)
			if got := ds.Spec.Template.Spec.NodeSelector; len(got) != 1 || got["node-role.kubernetes.io/control-plane"] != "" {
				t.Errorf("nodeSelector %v, want the manifest's control-plane selector", got)
			}
			if got := ds.Spec.Template.Spec.Tolerations; len(got) != 2 || got[1].Key != "node-role.kubernetes.io/control-plane" {
				t.Errorf("tolerations %+v, want the manifest's", got)
			}
		},
	}, {
		name:       "CCM of a Kamaji plan: no nodeSelector, the plan's tolerations",
		scheduling: kamajiScheduling,
		params:     kamajiParams,
		path:       ccmPath,
		report:     "applied 3 objects of " + ccmPath + " at 8f3c2a91d0e4 with the plan's scheduling (no nodeSelector, 2 tolerations)",
		check: func(t *testing.T) {
			ds := env.ccm(t)
			if got := ds.Spec.Template.Spec.NodeSelector; len(got) != 0 {
				t.Errorf("nodeSelector %v, want none", got)
			}
			want := []corev1.Toleration{
				// No operator in the plan: none applied (Equal, to the scheduler).
				{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule},
				{Key: "node.cluster.x-k8s.io/uninitialized", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			}
			got := ds.Spec.Template.Spec.Tolerations
			if len(got) != len(want) {
				t.Fatalf("tolerations %+v, want %+v", got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("toleration %d = %+v, want %+v", i, got[i], want[i])
				}
			}
			var sa corev1.ServiceAccount
			env.get(t, "kube-system", "cloud-controller-manager", &sa)
			checkAnnotated(t, &sa)
			var crb rbacv1.ClusterRoleBinding
			env.get(t, "", "system:cloud-controller-manager", &crb)
			checkAnnotated(t, &crb)
		},
	}, {
		name:       "a nodeSelector another field manager set survives: reported, not overwritten",
		scheduling: kamajiScheduling,
		params:     kamajiParams,
		path:       ccmPath,
		before: func(t *testing.T) {
			// A person applies the upstream manifest's nodeSelector by
			// hand, as seed 004's readers do before they edit it.
			ds := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "apps/v1", "kind": "DaemonSet",
				"metadata": map[string]any{"namespace": "kube-system", "name": "openstack-cloud-controller-manager"},
				"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
					"nodeSelector": map[string]any{"node-role.kubernetes.io/control-plane": ""},
				}}},
			}}
			if err := c.Patch(ctx, ds, client.Apply, client.FieldOwner("kubectl")); err != nil {
				t.Fatal(err)
			}
		},
		wantErr: []string{"the plan says no nodeSelector", "owned by field manager kubectl", "remove the nodeSelector there"},
	}, {
		name:   "VPN overlay: Namespace first",
		path:   overlayPath,
		report: "applied 3 objects of " + overlayPath + " at 8f3c2a91d0e4",
		check: func(t *testing.T) {
			var ds appsv1.DaemonSet
			env.get(t, "vpn", "vpn-client", &ds)
			checkAnnotated(t, &ds)
			var cm corev1.ConfigMap
			env.get(t, "vpn", "vpn-routes", &cm)
			checkAnnotated(t, &cm)
			if cm.Data["routes"] != "10.10.0.0/16" {
				t.Errorf("ConfigMap data %v", cm.Data)
			}
			// The observer, which the planner's done condition reads,
			// agrees the manifest is applied.
			o := &observer.Observer{Client: env.mgmt.Client, Manifests: os.DirFS("testdata/workload")}
			s, err := o.Observe(ctx, testPlan(kubeadmCCM), observed.Record{})
			if err != nil {
				t.Fatal(err)
			}
			if !s.Manifest(overlayPath).Applied {
				t.Errorf("observer: %s not applied (workload error %q)", overlayPath, s.WorkloadError)
			}
		},
	}, {
		name:   "an object that names no namespace goes to default, as kubectl puts it",
		path:   "manifests/no-namespace.yaml",
		report: "applied 1 objects of manifests/no-namespace.yaml at 8f3c2a91d0e4",
		check: func(t *testing.T) {
			var cm corev1.ConfigMap
			env.get(t, "default", "mtu-settings", &cm)
			checkAnnotated(t, &cm)
		},
	}, {
		name:     "a manifest with a Secret is refused, and nothing of it applied",
		path:     "manifests/with-secret.yaml",
		wantErr:  []string{"manifest manifests/with-secret.yaml holds Secret default/vpn-psk", "do not belong in the plans repository"},
		terminal: true,
		check: func(t *testing.T) {
			for name, obj := range map[string]client.Object{"vpn-psk": &corev1.Secret{}, "vpn-settings": &corev1.ConfigMap{}} {
				if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, obj); !apierrors.IsNotFound(err) {
					t.Errorf("%T default/%s: %v, want not found", obj, name, err)
				}
			}
		},
	}, {
		name: "a key another field manager owns is a conflict, reported and retryable",
		path: "manifests/conflict.yaml",
		before: func(t *testing.T) {
			cm := &corev1.ConfigMap{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "shared-settings"},
				Data:       map[string]string{"mtu": "1500"},
			}
			if err := c.Patch(ctx, cm, client.Apply, client.FieldOwner("network-team")); err != nil {
				t.Fatal(err)
			}
		},
		wantErr: []string{"apply manifest manifests/conflict.yaml: ConfigMap default/shared-settings", "ferry does not force ownership", `conflict with "network-team"`},
		check: func(t *testing.T) {
			var cm corev1.ConfigMap
			env.get(t, "default", "shared-settings", &cm)
			if cm.Data["mtu"] != "1500" {
				t.Errorf("mtu = %q, want the other manager's 1500 kept", cm.Data["mtu"])
			}
		},
	}, {
		name:     "an object the API server rejects is terminal",
		path:     "manifests/invalid.yaml",
		wantErr:  []string{"apply manifest manifests/invalid.yaml: ConfigMap default/bad-keys: rejected by the API server", "a valid config key"},
		terminal: true,
	}, {
		name:     "a manifest missing at the revision is terminal",
		path:     "manifests/absent.yaml",
		wantErr:  []string{"manifest manifests/absent.yaml at " + testRevision},
		terminal: true,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before(t)
			}
			// Delivered as the stream delivers it, through JSON, which
			// must keep an empty nodeSelector empty (none) and not nil
			// (the manifest's).
			in := inputs()
			in.Scheduling = tc.scheduling
			step := delivered(t, planStep("c1", in, step.Apply, step.Target{Kind: step.Manifest, Name: tc.path}, tc.params))
			for run := 1; run <= 2; run++ {
				rep, err := env.exec.Execute(ctx, step)
				checkWorkloadErr(t, err, tc.wantErr, tc.terminal)
				if err != nil && strings.Contains(err.Error(), "workload-test-secret-value") {
					t.Errorf("error shows a Secret's value: %v", err)
				}
				if len(tc.wantErr) == 0 && rep.Message != tc.report {
					t.Errorf("run %d: report %q, want %q", run, rep.Message, tc.report)
				}
			}
			if tc.check != nil {
				tc.check(t)
			}
		})
	}
}

// ccm reads the applied CCM DaemonSet and checks its annotations.
func (env *testEnv) ccm(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	var ds appsv1.DaemonSet
	env.get(t, "kube-system", "openstack-cloud-controller-manager", &ds)
	checkAnnotated(t, &ds)
	return &ds
}

func (env *testEnv) get(t *testing.T, ns, name string, obj client.Object) {
	t.Helper()
	if err := env.wl.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatalf("get %T %s/%s: %v", obj, ns, name, err)
	}
}

func checkAnnotated(t *testing.T, obj client.Object) {
	t.Helper()
	a := obj.GetAnnotations()
	if a[AnnotationPlan] != "c1" || a[AnnotationRevision] != testRevision {
		t.Errorf("%T %s annotations %v, want plan c1 at revision %s", obj, obj.GetName(), a, testRevision)
	}
}

// testWorkloadWaitManifest waits for the VPN overlay's DaemonSet. No
// DaemonSet controller runs in envtest: the test writes the status the
// controller would once the pods run.
func testWorkloadWaitManifest(t *testing.T, env *testEnv) {
	ctx := context.Background()
	// The Apply test applies the same file, maybe at the same time: the
	// same field manager applying the same objects does not conflict.
	apply := stepEvent(step.Apply, step.Target{Kind: step.Manifest, Name: overlayPath}, nil)
	if _, err := env.exec.Execute(ctx, apply); err != nil {
		t.Fatal(err)
	}
	wait := func(timeout string) error {
		_, err := env.exec.Execute(ctx, stepEvent(step.Wait, step.Target{Kind: step.Manifest, Name: overlayPath},
			map[string]string{"for": "workloads available", "timeout": timeout}))
		return err
	}
	err := wait("1s")
	checkWorkloadErr(t, err, []string{"wait for manifest " + overlayPath + ": DaemonSet vpn/vpn-client: not ready after 1s (0 of 0 pods available, generation 1 observed 0)"}, false)

	go func() {
		time.Sleep(500 * time.Millisecond)
		var ds appsv1.DaemonSet
		if err := env.wl.Client.Get(ctx, client.ObjectKey{Namespace: "vpn", Name: "vpn-client"}, &ds); err != nil {
			t.Errorf("get DaemonSet: %v", err)
			return
		}
		ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, DesiredNumberScheduled: 3,
			CurrentNumberScheduled: 3, NumberReady: 3, NumberAvailable: 3, UpdatedNumberScheduled: 3}
		if err := env.wl.Client.Status().Update(ctx, &ds); err != nil {
			t.Errorf("mark DaemonSet available: %v", err)
		}
	}()
	for run := 1; run <= 2; run++ {
		rep, err := env.exec.Execute(ctx, stepEvent(step.Wait, step.Target{Kind: step.Manifest, Name: overlayPath},
			map[string]string{"timeout": "30s"}))
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if want := "manifest " + overlayPath + " available: DaemonSet vpn/vpn-client"; rep.Message != want {
			t.Errorf("run %d: report %q, want %q", run, rep.Message, want)
		}
	}
	o := &observer.Observer{Client: env.mgmt.Client, Manifests: os.DirFS("testdata/workload")}
	s, err := o.Observe(ctx, testPlan(kubeadmCCM), observed.Record{})
	if err != nil {
		t.Fatal(err)
	}
	if m := s.Manifest(overlayPath); !m.Applied || !m.Healthy {
		t.Errorf("observer: %s = %+v, want applied and healthy (workload error %q)", overlayPath, m, s.WorkloadError)
	}
}

// testWorkloadWaitService waits for a LoadBalancer Service's address. No
// cloud controller manager runs in envtest: the test writes the address a
// load balancer would get.
func testWorkloadWaitService(t *testing.T, env *testEnv) {
	ctx := context.Background()
	c := env.wl.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}); err != nil {
		t.Fatal(err)
	}
	for name, typ := range map[string]corev1.ServiceType{"ingress": corev1.ServiceTypeLoadBalancer, "internal": corev1.ServiceTypeClusterIP} {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
			Spec:       corev1.ServiceSpec{Type: typ, Ports: []corev1.ServicePort{{Port: 443}}},
		}
		if err := c.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
	}
	wait := func(name, timeout string) (string, error) {
		rep, err := env.exec.Execute(ctx, stepEvent(step.Wait, step.Target{Kind: step.Service, Namespace: "shop", Name: name},
			map[string]string{"for": "an external address", "timeout": timeout}))
		return rep.Message, err
	}

	_, err := wait("ingress", "1s")
	checkWorkloadErr(t, err, []string{"wait for Service shop/ingress: not ready after 1s (no external address yet)"}, false)
	_, err = wait("internal", "10s")
	checkWorkloadErr(t, err, []string{"wait for Service shop/internal: it is of type ClusterIP"}, true)

	go func() {
		time.Sleep(500 * time.Millisecond)
		var svc corev1.Service
		if err := c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "ingress"}, &svc); err != nil {
			t.Errorf("get Service: %v", err)
			return
		}
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.10"}}
		if err := c.Status().Update(ctx, &svc); err != nil {
			t.Errorf("set load balancer address: %v", err)
		}
	}()
	for run := 1; run <= 2; run++ {
		rep, err := wait("ingress", "30s")
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if want := "Service shop/ingress has external address 203.0.113.10"; rep != want {
			t.Errorf("run %d: report %q, want %q", run, rep, want)
		}
	}
}
