package deploy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	infrav1alpha1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1alpha1"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/bootstrap/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/events"
	kubeexec "github.com/ferry-dev/ferry/internal/executor/kube"
	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// planNamespace is the namespace of clusters the access test grants
// ferry with deploy/plan-namespace; `default` gets nothing.
const planNamespace = "capi-clusters"

// policy is the name of deploy/base/admission.yaml's policy, which its
// denials name.
const policy = "ferry-reconciler-deletes-labelled"

// TestServiceAccountActs: acting as ferry's service account on an API
// server with RBAC and admission policies, with deploy/ and one
// plan-namespace Role applied, what ferry's code does works, and what it
// must not do is refused, by RBAC (403) or by deploy/'s admission policy,
// and leaves the object as it was.
func TestServiceAccountActs(t *testing.T) {
	ctx := context.Background()
	k := testenv.StartKube(t)
	mustCreate(t, k.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: planNamespace}})
	testenv.ApplyKustomization(t, k, ".")
	testenv.ApplyKustomizationIn(t, k, "plan-namespace", planNamespace)

	const plan = "p1"
	created := map[string]string{observed.LabelCreatedBy: plan}
	kc := &bootstrapv1.KubeadmConfig{ObjectMeta: meta(planNamespace, "kc-1", created)}
	mustCreate(t, k.Client, kc)
	bootstrapData := &corev1.Secret{ObjectMeta: meta(planNamespace, "kc-1-data", nil), Type: clusterv1.ClusterSecretType}
	bootstrapData.OwnerReferences = []metav1.OwnerReference{{APIVersion: bootstrapv1.GroupVersion.String(), Kind: "KubeadmConfig",
		Name: kc.Name, UID: kc.UID, Controller: ptr.To(true)}}
	mustCreate(t, k.Client,
		secret("default", "c1-kubeconfig", nil), secret(planNamespace, "c1-kubeconfig", nil),
		secret(planNamespace, "c1-cloud-config", created), bootstrapData, secret("ferry-system", "openstack-credentials", nil),
		testCluster("default", "c1", nil), testCluster(planNamespace, "c1", nil), testCluster(planNamespace, "c2", created),
		testMD("old-pool", nil), testMD("new-pool", created), testMD("users-pool", nil),
		testServer("gateway-1", map[string]string{observed.LabelPlan: plan}), testServer("c1-worker-0", nil))

	as := impersonate(t, k)
	waitForPolicy(t, as, testCluster(planNamespace, "c1", nil))

	// What ferry does: each must work.
	for _, tc := range []struct {
		what string
		do   func() error
	}{
		{"read a Secret in a plan namespace", func() error {
			return as.Get(ctx, client.ObjectKey{Namespace: planNamespace, Name: "c1-kubeconfig"}, &corev1.Secret{})
		}},
		{"list Secrets in a plan namespace (the observer's informer)", func() error {
			return as.List(ctx, &corev1.SecretList{}, client.InNamespace(planNamespace))
		}},
		{"read a credentials source in ferry-system", func() error {
			return as.Get(ctx, client.ObjectKey{Namespace: "ferry-system", Name: "openstack-credentials"}, &corev1.Secret{})
		}},
		{"patch a Secret in a plan namespace (copy missing keys, label it)", func() error {
			return mergePatch(ctx, as, secret(planNamespace, "c1-kubeconfig", nil), `{"metadata":{"labels":{"cluster.x-k8s.io/cluster-name":"c1"}},"data":{"extra":"eA=="}}`)
		}},
		{"create a Secret in a plan namespace", func() error { return as.Create(ctx, secret(planNamespace, "copy", created)) }},
		{"delete a Secret ferry created", func() error { return as.Delete(ctx, secret(planNamespace, "copy", nil)) }},
		{"delete the bootstrap data of a KubeadmConfig", func() error { return as.Delete(ctx, bootstrapData.DeepCopy()) }},
		{"list Clusters in every namespace", func() error { return as.List(ctx, &clusterv1.ClusterList{}) }},
		{"patch a Cluster (pause it)", func() error {
			return mergePatch(ctx, as, testCluster("default", "c1", nil), `{"spec":{"paused":true},"metadata":{"annotations":{"ferry.dev/paused-by":"p1"}}}`)
		}},
		{"pause and mark an old pool (prepare)", func() error {
			return mergePatch(ctx, as, testMD("old-pool", nil), `{"metadata":{"labels":{"ferry.dev/replaced-by":"p1"},"annotations":{"cluster.x-k8s.io/paused":"true"}}}`)
		}},
		{"delete the marked old pool (cleanup)", func() error { return as.Delete(ctx, testMD("old-pool", nil)) }},
		{"delete a pool ferry created (rollback)", func() error { return as.Delete(ctx, testMD("new-pool", nil)) }},
		{"delete a Cluster ferry created (rollback)", func() error { return as.Delete(ctx, testCluster(planNamespace, "c2", nil)) }},
		{"delete a gateway OpenStackServer", func() error { return as.Delete(ctx, testServer("gateway-1", nil)) }},
		{"create an OpenStackCluster", func() error {
			return as.Create(ctx, &infrav1.OpenStackCluster{ObjectMeta: meta(planNamespace, "c1", created),
				Spec: infrav1.OpenStackClusterSpec{IdentityRef: infrav1.OpenStackIdentityReference{Name: "c1-cloud-config", CloudName: "openstack"}}})
		}},
		{"record an adopted server in an OpenStackServer's status", func() error {
			var oss infrav1alpha1.OpenStackServer
			if err := as.Get(ctx, client.ObjectKey{Namespace: planNamespace, Name: "c1-worker-0"}, &oss); err != nil {
				return err
			}
			oss.Status.InstanceID = ptr.To("d6f1c1a4")
			return as.Status().Update(ctx, &oss)
		}},
		{"create, read and renew its Lease", func() error {
			l := &coordinationv1.Lease{ObjectMeta: meta("ferry-system", "ferry-reconciler", nil), Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pod-a")}}
			if err := as.Create(ctx, l); err != nil {
				return err
			}
			if err := as.Get(ctx, client.ObjectKeyFromObject(l), l); err != nil {
				return err
			}
			l.Spec.HolderIdentity = ptr.To("pod-b")
			return as.Update(ctx, l)
		}},
		{"write and count an Event on a Cluster", func() error {
			ev := &corev1.Event{ObjectMeta: meta(planNamespace, "c1.ferry", nil), Reason: "PhaseDone", Message: "prepare done", Type: "Normal",
				InvolvedObject: corev1.ObjectReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Namespace: planNamespace, Name: "c1"}}
			if err := as.Create(ctx, ev); err != nil {
				return err
			}
			if err := as.List(ctx, &corev1.EventList{}, client.InNamespace(planNamespace)); err != nil {
				return err
			}
			return mergePatch(ctx, as, ev, `{"count":2}`)
		}},
	} {
		if err := tc.do(); err != nil {
			t.Errorf("%s: %v; ferry does it", tc.what, err)
		}
	}
	for _, gone := range []client.Object{testMD("old-pool", nil), testMD("new-pool", nil), testCluster(planNamespace, "c2", nil),
		testServer("gateway-1", nil), secret(planNamespace, "copy", nil), bootstrapData.DeepCopy()} {
		if err := k.Client.Get(ctx, client.ObjectKeyFromObject(gone), gone); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s after its deletion: %v; want it gone", gone, gone.GetName(), err)
		}
	}

	// What ferry must not do: each is refused, and changes nothing.
	type refusal struct {
		what string
		do   func() error
		// by is "rbac" or "policy": who refuses.
		by string
		// unchanged is read before and after, as the administrator; nil
		// for a refusal of a read or a create.
		unchanged client.Object
	}
	inDefault := secret("default", "c1-kubeconfig", nil)
	for _, tc := range []refusal{
		{"read a Secret in default, which no plan-namespace Role grants", func() error {
			return as.Get(ctx, client.ObjectKeyFromObject(inDefault), &corev1.Secret{})
		}, "rbac", nil},
		{"update a Secret in default", func() error {
			s := inDefault.DeepCopy()
			s.Data = map[string][]byte{"value": []byte("x")}
			return as.Update(ctx, s)
		}, "rbac", inDefault},
		{"patch a Secret in default", func() error { return mergePatch(ctx, as, inDefault, `{"data":{"extra":"eA=="}}`) }, "rbac", inDefault},
		{"delete a Secret in default", func() error { return as.Delete(ctx, inDefault.DeepCopy()) }, "rbac", inDefault},
		{"list Secrets in every namespace", func() error { return as.List(ctx, &corev1.SecretList{}) }, "rbac", nil},
		{"create a Secret in ferry-system", func() error { return as.Create(ctx, secret("ferry-system", "x", nil)) }, "rbac", nil},
		{"patch a credentials source in ferry-system", func() error {
			return mergePatch(ctx, as, secret("ferry-system", "openstack-credentials", nil), `{"data":{"extra":"eA=="}}`)
		}, "rbac", secret("ferry-system", "openstack-credentials", nil)},
		{"replace a Secret in a plan namespace with update (ferry patches)", func() error {
			s := secret(planNamespace, "c1-kubeconfig", nil)
			if err := k.Client.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
				return err
			}
			s.Data = nil
			return as.Update(ctx, s)
		}, "rbac", secret(planNamespace, "c1-kubeconfig", nil)},
		{"delete a Secret ferry did not create in a plan namespace", func() error {
			return as.Delete(ctx, secret(planNamespace, "c1-kubeconfig", nil))
		}, "policy", secret(planNamespace, "c1-kubeconfig", nil)},
		{"mark a Secret as created by ferry", func() error {
			return mergePatch(ctx, as, secret(planNamespace, "c1-kubeconfig", nil), `{"metadata":{"labels":{"ferry.dev/created-by":"p1"}}}`)
		}, "policy", secret(planNamespace, "c1-kubeconfig", nil)},
		{"delete a MachineDeployment without ferry's mark", func() error { return as.Delete(ctx, testMD("users-pool", nil)) },
			"policy", testMD("users-pool", nil)},
		{"mark a MachineDeployment as created by ferry", func() error {
			return mergePatch(ctx, as, testMD("users-pool", nil), `{"metadata":{"labels":{"ferry.dev/created-by":"p1"}}}`)
		}, "policy", testMD("users-pool", nil)},
		{"delete a Cluster ferry did not create", func() error { return as.Delete(ctx, testCluster(planNamespace, "c1", nil)) },
			"policy", testCluster(planNamespace, "c1", nil)},
		{"delete an OpenStackServer that is no gateway of ferry's", func() error { return as.Delete(ctx, testServer("c1-worker-0", nil)) },
			"policy", testServer("c1-worker-0", nil)},
		{"make an OpenStackServer a gateway of ferry's", func() error {
			return mergePatch(ctx, as, testServer("c1-worker-0", nil), `{"metadata":{"labels":{"ferry.dev/plan":"p1"}}}`)
		}, "policy", testServer("c1-worker-0", nil)},
		{"delete every MachineDeployment of a namespace at once", func() error {
			return as.DeleteAllOf(ctx, &clusterv1.MachineDeployment{}, client.InNamespace(planNamespace))
		}, "rbac", testMD("users-pool", nil)},
		{"create an infrastructure kind ferry does not write (DockerCluster)", func() error {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1beta1")
			u.SetKind("DockerCluster")
			u.SetNamespace(planNamespace)
			u.SetName("c1")
			return as.Create(ctx, u)
		}, "rbac", nil},
		{"delete a KamajiControlPlane (ferry only patches them)", func() error {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion("controlplane.cluster.x-k8s.io/v1alpha1")
			u.SetKind("KamajiControlPlane")
			u.SetNamespace(planNamespace)
			u.SetName("c1")
			return as.Delete(ctx, u)
		}, "rbac", nil},
		{"update a MachineDeployment (ferry patches)", func() error {
			md := testMD("users-pool", nil)
			if err := k.Client.Get(ctx, client.ObjectKeyFromObject(md), md); err != nil {
				return err
			}
			md.Spec.Replicas = ptr.To[int32](0)
			return as.Update(ctx, md)
		}, "rbac", testMD("users-pool", nil)},
		{"read another Lease in ferry-system", func() error {
			return as.Get(ctx, client.ObjectKey{Namespace: "ferry-system", Name: "someone-else"}, &coordinationv1.Lease{})
		}, "rbac", nil},
		{"take a Lease in kube-system", func() error {
			return as.Create(ctx, &coordinationv1.Lease{ObjectMeta: meta("kube-system", "ferry-reconciler", nil)})
		}, "rbac", nil},
		{"write an Event in default", func() error {
			return as.Create(ctx, &corev1.Event{ObjectMeta: meta("default", "c1.ferry", nil),
				InvolvedObject: corev1.ObjectReference{Kind: "Cluster", Namespace: "default", Name: "c1"}})
		}, "rbac", nil},
		{"read a Pod", func() error { return as.List(ctx, &corev1.PodList{}, client.InNamespace(planNamespace)) }, "rbac", nil},
		{"delete a Namespace", func() error {
			return as.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: planNamespace}})
		}, "rbac", nil},
	} {
		var before client.Object
		if tc.unchanged != nil {
			before = tc.unchanged.DeepCopyObject().(client.Object)
			if err := k.Client.Get(ctx, client.ObjectKeyFromObject(before), before); err != nil {
				t.Fatalf("%s: read it before: %v", tc.what, err)
			}
		}
		err := tc.do()
		t.Logf("%s: %v", tc.what, err)
		switch {
		case !apierrors.IsForbidden(err):
			t.Errorf("%s: %v; want it forbidden (by %s)", tc.what, err, tc.by)
		case tc.by == "rbac" && strings.Contains(err.Error(), "ValidatingAdmissionPolicy"):
			t.Errorf("%s: refused by the admission policy, %v; want RBAC to refuse it", tc.what, err)
		case tc.by == "policy" && !strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policy+"'"):
			t.Errorf("%s: %v; want the admission policy %s to refuse it (RBAC allows it)", tc.what, err, policy)
		}
		if before != nil {
			after := tc.unchanged.DeepCopyObject().(client.Object)
			if err := k.Client.Get(ctx, client.ObjectKeyFromObject(after), after); err != nil {
				t.Errorf("%s: refused, and then: %v", tc.what, err)
			} else if after.GetResourceVersion() != before.GetResourceVersion() || after.GetDeletionTimestamp() != nil {
				t.Errorf("%s: refused, but %T %s changed (resourceVersion %s, then %s; deleting %t)", tc.what, after, after.GetName(),
					before.GetResourceVersion(), after.GetResourceVersion(), after.GetDeletionTimestamp() != nil)
			}
		}
	}
}

// impersonate is a client of k acting as ferry's service account, with
// the groups the API server gives a service account's token.
func impersonate(t *testing.T, k *testenv.Kube) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(k.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: serviceAccount,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ferry-system", "system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: k.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitForPolicy waits until the API server enforces deploy/'s admission
// policy, which it loads a moment after the policy is created: until a
// dry run of the deletion of notFerrys, an object without ferry's label,
// is refused.
func waitForPolicy(t *testing.T, as client.Client, notFerrys client.Object) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := as.Delete(context.Background(), notFerrys, client.DryRunAll)
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), policy) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the admission policy %s is not enforced after a minute: a dry-run deletion of %T %s: %v", policy, notFerrys, notFerrys.GetName(), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func mergePatch(ctx context.Context, c client.Client, obj client.Object, patch string) error {
	return c.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", []byte(patch)))
}

func mustCreate(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		if err := c.Create(context.Background(), obj); err != nil {
			t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
		}
	}
}

func meta(namespace, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels}
}

func secret(namespace, name string, labels map[string]string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: meta(namespace, name, labels), Data: map[string][]byte{"value": []byte("v")}}
}

func testCluster(namespace, name string, labels map[string]string) *clusterv1.Cluster {
	return &clusterv1.Cluster{ObjectMeta: meta(namespace, name, labels)}
}

func testMD(name string, labels map[string]string) *clusterv1.MachineDeployment {
	sel := map[string]string{"pool": name}
	return &clusterv1.MachineDeployment{ObjectMeta: meta(planNamespace, name, labels), Spec: clusterv1.MachineDeploymentSpec{
		ClusterName: "c1", Selector: metav1.LabelSelector{MatchLabels: sel},
		Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: sel}, Spec: clusterv1.MachineSpec{
			ClusterName: "c1", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("data")},
			InfrastructureRef: corev1.ObjectReference{APIVersion: "infrastructure.cluster.x-k8s.io/v1beta1", Kind: "DockerMachineTemplate", Name: name}}},
	}}
}

func testServer(name string, labels map[string]string) *infrav1alpha1.OpenStackServer {
	return &infrav1alpha1.OpenStackServer{ObjectMeta: meta(planNamespace, name, labels), Spec: infrav1alpha1.OpenStackServerSpec{
		Flavor:      ptr.To("m1.small"),
		Image:       infrav1.ImageParam{Filter: &infrav1.ImageFilter{Name: ptr.To("ubuntu")}},
		IdentityRef: infrav1.OpenStackIdentityReference{Name: "c1-cloud-config", CloudName: "openstack"},
		Ports:       []infrav1.PortOpts{{Network: &infrav1.NetworkParam{Filter: &infrav1.NetworkFilter{Name: "dmz"}}}},
	}}
}

// TestExecutorWithinPolicy: the kube executor, as ferry's service
// account, marks what it later deletes as deploy/'s admission policy
// wants it: prepare's pause labels an old pool, which cleanup then
// deletes; a rollback removes a Secret it copied and a KubeadmConfig it
// created with its bootstrap data. A pool without the mark is refused by
// the executor before the policy would.
func TestExecutorWithinPolicy(t *testing.T) {
	ctx := context.Background()
	k := testenv.StartKube(t)
	testenv.ApplyKustomization(t, k, ".")
	testenv.ApplyKustomizationIn(t, k, "plan-namespace", "default")
	plan := testenv.ExamplePlanDecoded(t, "cluster")
	ns, cluster := plan.Spec.Cluster.Namespace, plan.Spec.Cluster.Name
	at := func(obj client.Object) client.Object { obj.SetNamespace(ns); return obj }

	kc := &bootstrapv1.KubeadmConfig{ObjectMeta: meta(ns, cluster+"-md-0-x1", map[string]string{
		observed.LabelCreatedBy: plan.Metadata.Name, clusterv1.ClusterNameLabel: cluster})}
	mustCreate(t, k.Client, at(testMD("old-pool", nil)), at(testMD("users-pool", nil)), kc,
		secret("ferry-system", "openstack-credentials", nil))
	data := &corev1.Secret{ObjectMeta: meta(ns, kc.Name, nil), Type: clusterv1.ClusterSecretType}
	data.OwnerReferences = []metav1.OwnerReference{{APIVersion: bootstrapv1.GroupVersion.String(), Kind: "KubeadmConfig",
		Name: kc.Name, UID: kc.UID, Controller: ptr.To(true)}}
	mustCreate(t, k.Client, data)
	kc.Status.DataSecretName = ptr.To(data.Name)
	if err := k.Client.Status().Update(ctx, kc); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"old-pool", "users-pool"} {
		md := at(testMD(name, nil)).(*clusterv1.MachineDeployment)
		if err := mergePatch(ctx, k.Client, md, `{"spec":{"clusterName":"`+cluster+`"}}`); err != nil {
			t.Fatal(err)
		}
	}

	as := impersonate(t, k)
	waitForPolicy(t, as, at(testMD("users-pool", nil)))
	cfg := rest.CopyConfig(k.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: serviceAccount,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ferry-system", "system:authenticated"}}
	e, err := kubeexec.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		action     step.Action
		kind, name string
		params     map[string]string
		wantErr    string
	}{
		{action: step.Pause, kind: step.MachineDeployment, name: "old-pool"},
		{action: step.Delete, kind: step.MachineDeployment, name: "old-pool"},
		{action: step.Delete, kind: step.MachineDeployment, name: "users-pool", wantErr: "ferry deletes no other"},
		{action: step.CopySecret, kind: step.Secret, name: cluster + "-cloud-config",
			params: map[string]string{step.ParamFrom: step.NamespacedName("ferry-system", "openstack-credentials")}},
		{action: step.Remove, kind: step.Secret, name: cluster + "-cloud-config"},
		{action: step.Remove, kind: step.KubeadmConfig, name: kc.Name},
	} {
		st := step.Step{Key: string(tc.action) + "/" + tc.name, Phase: "test", Executor: step.Kube, Action: tc.action,
			Target: step.Target{Kind: tc.kind, Namespace: ns, Name: tc.name}, Params: tc.params,
			Inputs: &step.Inputs{Cluster: plan.Spec.Cluster}}
		rep, err := e.Execute(ctx, events.NewStepEvent(plan.Metadata.Name, "test-revision", st, time.Now()))
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s %s %s as the service account: %v", tc.action, tc.kind, tc.name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !failure.IsTerminal(err)):
			t.Errorf("%s %s %s: %v; want the executor's terminal refusal %q", tc.action, tc.kind, tc.name, err, tc.wantErr)
		default:
			t.Logf("%s %s %s: %s %v", tc.action, tc.kind, tc.name, rep.Message, err)
		}
	}
	for _, gone := range []client.Object{at(testMD("old-pool", nil)), secret(ns, cluster+"-cloud-config", nil), kc, data} {
		if err := k.Client.Get(ctx, client.ObjectKeyFromObject(gone), gone); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s: %v; want it gone", gone, gone.GetName(), err)
		}
	}
	var kept clusterv1.MachineDeployment
	testenv.MustGet(t, k.Client, ns, "users-pool", &kept)
	testenv.Expect(t, "the unmarked pool's labels and deletion", kept.Labels == nil && kept.DeletionTimestamp == nil, true)
}
