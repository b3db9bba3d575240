package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

func TestExecutorUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"executor"}, "--nats-url is required"},
		{[]string{"executor", "--nats-url", "nats://127.0.0.1:1", "--kinds", "kube,workload,teleport"}, `unknown executor kind "teleport"`},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code == 0 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("run(%q) = %d, stderr %q; want failure mentioning %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// TestExecutorReplica runs `reconciler executor` as a replica against an
// external NATS server and a real management cluster, and has it cordon a
// node of the workload cluster and apply a manifest that it reads from the
// plans repository at the step's revision.
func TestExecutorReplica(t *testing.T) {
	mgmt := testenv.StartKube(t)
	workload := testenv.StartKube(t)
	testenv.Orphan(t, mgmt, workload, testenv.OrphanedCluster{
		Name: "c1", Namespace: "default", ControlPlaneNodes: []string{"c1-cp-0"}, WorkerNodes: []string{"c1-md-0-a"}, KubeletVersion: "v1.31.4",
	})
	nats := testenv.StartNATS(t)
	seed := testenv.SeedDir(t, map[string]string{"manifests/ccm.yaml": testenv.CCMManifest})
	g := testenv.StartGit(t, seed)
	rev := testenv.NewPlansRepo(t, g, nil).Commit("Add a README", "dev", map[string]string{"README.md": "Plans.\n"})
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, mgmt.Kubeconfig(t), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var stderr bytes.Buffer
	var code int
	wg.Add(1)
	go func() {
		defer wg.Done()
		code = runContext(ctx, []string{"executor", "--nats-url", nats.URL, "--kubeconfig", kubeconfig, "--repo", g.URL, "--data-dir", t.TempDir()},
			&bytes.Buffer{}, &stderr)
	}()
	defer func() {
		cancel()
		wg.Wait()
		if code != 0 {
			t.Errorf("executor exited %d: %s", code, stderr.String())
		}
	}()

	cluster := v1alpha1.ClusterRef{Name: "c1", Namespace: "default"}
	ev := events.NewStepEvent("c1", "rev1", step.Step{Key: "cutover/cordon/node/c1-md-0-a", Phase: "cutover", Executor: step.Workload,
		Action: step.Cordon, Target: step.Target{Kind: step.Node, Name: "c1-md-0-a"}, Inputs: &step.Inputs{Cluster: cluster}}, time.Now())
	// The replica waits for the streams, which the reconciler makes: here
	// the test, as the reconciler.
	if err := events.EnsureStreams(ctx, nats.JetStream); err != nil {
		t.Fatal(err)
	}
	if _, err := (&events.Publisher{JS: nats.JetStream}).PublishStep(ctx, ev); err != nil {
		t.Fatalf("publish: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	var node corev1.Node
	for time.Now().Before(deadline) {
		if err := workload.Client.Get(ctx, client.ObjectKey{Name: "c1-md-0-a"}, &node); err == nil && node.Spec.Unschedulable {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !node.Spec.Unschedulable {
		t.Fatalf("node not cordoned by the executor replica; its log:\n%s", stderr.String())
	}

	// A manifest at a revision pushed after the replica started: the
	// plan's cloud controller manager, scheduled as the manifest says.
	apply := events.NewStepEvent("c1", rev, step.Step{Key: "control-plane/apply/manifest/manifests/ccm.yaml", Phase: "control-plane",
		Executor: step.Workload, Action: step.Apply, Target: step.Target{Kind: step.Manifest, Name: "manifests/ccm.yaml"},
		Inputs: &step.Inputs{Cluster: cluster, Scheduling: &step.Scheduling{}}}, time.Now())
	if _, err := (&events.Publisher{JS: nats.JetStream}).PublishStep(ctx, apply); err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	for time.Now().Before(deadline) {
		if err := workload.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "openstack-cloud-controller-manager"}, &ds); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("manifest not applied by the executor replica; its log:\n%s", stderr.String())
}
