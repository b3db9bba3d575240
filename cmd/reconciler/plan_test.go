package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/app"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// A password that must never reach the output of `reconciler plan`.
const fakePassword = "ferry-test-password-do-not-print"

// TestPlanSeed000 runs `reconciler plan` against a real management API
// server holding a seed 000 style orphaned cluster, whose workload cluster
// is a second real API server, and checks the steps against the catalogue (docs/steps.md).
func TestPlanSeed000(t *testing.T) {
	mgmt := testenv.StartKube(t)
	workload := testenv.StartKube(t)
	testenv.Orphan(t, mgmt, workload, testenv.OrphanedCluster{
		Name: "capi-quickstart", Namespace: "default", BackupNamespace: "capi-backup",
		ControlPlaneNodes: []string{"capi-quickstart-control-plane-7xk2p"},
		WorkerNodes:       []string{"capi-quickstart-md-0-wq8fz", "capi-quickstart-md-0-zt5rn"},
		KubeletVersion:    "v1.31.4",
	})
	ctx := context.Background()
	mustCreate(t, mgmt, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ferry-system"}})
	mustCreate(t, mgmt, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ferry-system", Name: "openstack-credentials"},
		Data: map[string][]byte{
			"clouds.yaml": []byte("clouds:\n  openstack:\n    auth:\n      password: " + fakePassword + "\n"),
			"cacert":      testenv.NewPKI(t, "cloud").CA.Cert,
		},
	})

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, mgmt.Kubeconfig(t), 0o600); err != nil {
		t.Fatal(err)
	}
	planFile := filepath.Join(dir, "capi-quickstart.yaml")
	if err := os.WriteFile(planFile, []byte(testenv.ExamplePlan(t, "control-plane")), 0o644); err != nil {
		t.Fatal(err)
	}

	// A fresh orphaned cluster: the cluster phase runs next, control-plane
	// is approved and listed after it.
	res := runPlan(t, planFile, kubeconfig)
	assertSteps(t, res, "cluster", []string{
		"copy-secret Secret capi-quickstart-sa",           // 1. cluster Secrets (restored, never regenerated)
		"copy-secret Secret capi-quickstart-cloud-config", // 2. clouds.yaml and cacert
		"ensure-keypair Keypair capi-key",                 // (seed 000's manual step: the SSH key)
		"create Cluster capi-quickstart",                  // 3. Cluster, paused
		"create OpenStackCluster capi-quickstart",         // 4. OpenStackCluster
		"unpause Cluster capi-quickstart",                 // 5. unpaused
		"wait OpenStackCluster capi-quickstart",           // 6. ready
	})
	assertSteps(t, res, "control-plane", []string{
		"create KubeadmConfig capi-quickstart-control-plane-7xk2p",                                                            // 1.
		"create KubeadmControlPlane capi-quickstart-control-plane",                                                            // 2.
		"create Machine capi-quickstart-control-plane-7xk2p",                                                                  // 3.
		"create OpenStackMachineTemplate capi-quickstart-control-plane",                                                       // 4. (5. set at creation)
		"create OpenStackMachine capi-quickstart-control-plane-7xk2p",                                                         // 6. (7. set at creation)
		"bind OpenStackServer capi-quickstart-control-plane-7xk2p + set-provider-id Node capi-quickstart-control-plane-7xk2p", // CAPO finds the server, CAPI the Node, by ID
		"unpause Machine capi-quickstart-control-plane-7xk2p + unpause KubeadmControlPlane capi-quickstart-control-plane",     // 8.
		"wait KubeadmControlPlane capi-quickstart-control-plane",                                                              // 9.
		"apply Manifest manifests/openstack-cloud-controller-manager.yaml",                                                    // 10.
	})
	if res.Result.Runnable != "cluster" {
		t.Errorf("runnable phase = %q, want cluster", res.Result.Runnable)
	}

	// Phase cluster done by hand: the planner must see it in the API
	// server and leave only what it cannot see without the cloud.
	mustCreate(t, mgmt, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "capi-quickstart-sa",
		Labels: map[string]string{"cluster.x-k8s.io/cluster-name": "capi-quickstart"}}, Data: map[string][]byte{"tls.key": []byte("k")}})
	mustCreate(t, mgmt, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "capi-quickstart-cloud-config"},
		Data: map[string][]byte{"clouds.yaml": []byte("x"), "cacert": []byte("y")}})
	mustCreate(t, mgmt, &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "capi-quickstart"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: &corev1.ObjectReference{
			APIVersion: infrav1.SchemeGroupVersion.String(), Kind: "OpenStackCluster", Name: "capi-quickstart"}},
	})
	osc := &infrav1.OpenStackCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "capi-quickstart"},
		Spec: infrav1.OpenStackClusterSpec{IdentityRef: infrav1.OpenStackIdentityReference{Name: "capi-quickstart-cloud-config", CloudName: "openstack"}}}
	mustCreate(t, mgmt, osc)
	osc.Status.Ready = true
	if err := mgmt.Client.Status().Update(ctx, osc); err != nil {
		t.Fatal(err)
	}
	res = runPlan(t, planFile, kubeconfig)
	assertSteps(t, res, "cluster", []string{"ensure-keypair Keypair capi-key"})
	if ph := res.Result.Phase("cluster"); ph.Done != 10 {
		t.Errorf("cluster phase: %d steps done, want 10", ph.Done)
	}

	// The text form is the PR preview; it shows the defaults and never a
	// secret's value.
	var stdout, stderr bytes.Buffer
	if code := run([]string{"plan", planFile, "--kubeconfig", kubeconfig}, &stdout, &stderr); code != 0 {
		t.Fatalf("plan exited %d: %s", code, stderr.String())
	}
	for _, want := range []string{"Settings (defaults applied):", "timeouts: wait 30m", "Steps of phase cluster:", "Steps of phase control-plane:"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("plan output lacks %q:\n%s", want, stdout.String())
		}
	}
	if strings.Contains(stdout.String()+stderr.String(), fakePassword) {
		t.Errorf("plan output contains a secret value")
	}
}

func mustCreate(t *testing.T, k *testenv.Kube, obj client.Object) {
	t.Helper()
	if err := k.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func runPlan(t *testing.T, planFile, kubeconfig string) app.PlanOutput {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"plan", planFile, "--kubeconfig", kubeconfig, "-o", "json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("reconciler plan exited %d: %s", code, stderr.String())
	}
	var out app.PlanOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, stdout.String())
	}
	if strings.Contains(stdout.String(), fakePassword) {
		t.Errorf("plan -o json output contains a secret value")
	}
	return out
}

// assertSteps compares a phase's groups, one string per group ("action
// Kind name", parallel steps joined by " + "), with want.
func assertSteps(t *testing.T, out app.PlanOutput, phase string, want []string) {
	t.Helper()
	ph := out.Result.Phase(phase)
	if ph == nil {
		t.Fatalf("no phase %s", phase)
	}
	var got []string
	for _, g := range ph.Groups {
		var parts []string
		for _, s := range g.Steps {
			parts = append(parts, string(s.Action)+" "+s.Target.Kind+" "+s.Target.Name)
		}
		got = append(got, strings.Join(parts, " + "))
	}
	if !slices.Equal(got, want) {
		t.Errorf("phase %s steps:\n  got  %q\n  want %q", phase, got, want)
	}
}
