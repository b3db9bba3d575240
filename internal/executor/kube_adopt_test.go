package executor_test

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/controlplane/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/executor"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/observer"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/testenv"
)

// The Nova servers of the seed 000 nodes. The cloud is not part of this
// test: the snapshot gets these as if the openstack observer had looked
// them up by node name.
var kubeServers = map[string]string{
	kubeCPNode:  "0b6a3f4e-7c1d-4a57-9a0e-1f2d3c4b5a61",
	kubeWorker1: "5d2c8a9e-1b3f-4c6d-8e7a-9f0b1c2d3e41",
	kubeWorker2: "8e1f2a3b-4c5d-4e6f-9a0b-1c2d3e4f5a62",
}

// A value of the clouds.yaml Secret that must never reach a report.
const kubeSecretValue = "ferry-test-password-do-not-print"

// TestKubeAdoptSeed000 adopts seed 000's orphaned cluster through the kube
// executor: the real planner plans against a real observation of two real
// API servers (management and workload), every kube step of the runnable
// group is executed twice, and the loop re-observes and re-plans until
// nothing is left to run. The end state is checked object by object.
//
// Steps of the other executors are not run here. They are marked done in
// the snapshot, as their observers would report them once done: the SSH
// keypair is put into Snapshot.Cloud.Keypairs (with the Nova servers of
// the nodes in Cloud.Servers), the servers into BoundServers, the Nodes'
// provider IDs set, and the cloud controller manager manifest into
// Workload.Manifests as applied.
//
// This test is of the kube executor alone, without OpenStack: CAPO's and
// CAPI's controllers do not run, and the wait steps meet STAND-INS for
// them (capoStandIn, capiStandIn) that only report what those controllers
// would: the OpenStackCluster ready, the control plane and the pool's
// replicas ready and up to date. TestAdoptOpenStack and TestRunOpenStack
// run the same objects past the real controllers.
func TestKubeAdoptSeed000(t *testing.T) {
	mgmt := testenv.StartKube(t)
	workload := testenv.StartKube(t)
	testenv.Orphan(t, mgmt, workload, testenv.OrphanedCluster{
		Name: kubeCluster, Namespace: kubeNamespace, BackupNamespace: "capi-backup",
		ControlPlaneNodes: []string{kubeCPNode},
		WorkerNodes:       []string{kubeWorker1, kubeWorker2},
		KubeletVersion:    kubeVersion,
	})
	kubeMustCreate(t, mgmt.Client,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ferry-system"}},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ferry-system", Name: "openstack-credentials"},
			Data: map[string][]byte{
				"clouds.yaml": []byte("clouds:\n  openstack:\n    auth:\n      password: " + kubeSecretValue + "\n"),
				"cacert":      []byte("-----BEGIN CERTIFICATE-----\nplaceholder\n-----END CERTIFICATE-----\n"),
			},
		})
	plan := kubePlan(t, v1alpha1.PhaseWorkers)
	exec := kubeExecutor(t, mgmt)
	obs := &observer.Observer{Client: mgmt.Client}
	ctx := context.Background()

	ran, res := runAdoption(t, ctx, plan, obs, func(snap *observed.Snapshot) {
		if snap.Workload == nil {
			t.Fatalf("workload cluster not observed: %s", snap.WorkloadError)
		}
		snap.Cloud = &observed.Cloud{Servers: kubeServers, Keypairs: []string{plan.Spec.Target.SSHKey.Name}}
		snap.CloudError = ""
		snap.BoundServers = slices.Sorted(maps.Keys(kubeServers))
		for i := range snap.Workload.Nodes {
			snap.Workload.Nodes[i].ProviderID = "openstack:///" + kubeServers[snap.Workload.Nodes[i].Name]
		}
		snap.Workload.Manifests = map[string]observed.Manifest{
			plan.Spec.Manifests.CloudControllerManager.Path: {Applied: true, Healthy: true},
		}
	}, func(st planner.Step) {
		if st.Executor != planner.ExecKube {
			t.Fatalf("step %s is for executor %s; the snapshot should have marked it done", st.Key, st.Executor)
		}
		kubeRunTwice(t, exec, mgmt.Client, events.NewStepEvent(plan, "rev-1", st, time.Now()))
	})
	for _, ph := range res.Phases {
		if ph.State != planner.Succeeded {
			t.Errorf("phase %s is %s (%s); want Succeeded", ph.Name, ph.State, ph.Reason)
		}
	}
	want := []string{
		"copy-secret Secret capi-quickstart-sa",
		"copy-secret Secret capi-quickstart-cloud-config",
		"create Cluster capi-quickstart",
		"create OpenStackCluster capi-quickstart",
		"unpause Cluster capi-quickstart",
		"wait OpenStackCluster capi-quickstart",
		"create KubeadmConfig " + kubeCPNode,
		"create KubeadmControlPlane capi-quickstart-control-plane",
		"create Machine " + kubeCPNode,
		"create OpenStackMachineTemplate capi-quickstart-control-plane",
		"create OpenStackMachine " + kubeCPNode,
		"unpause Machine " + kubeCPNode + " + unpause KubeadmControlPlane capi-quickstart-control-plane",
		"wait KubeadmControlPlane capi-quickstart-control-plane",
		"create KubeadmConfigTemplate capi-quickstart-md-0",
		"create MachineDeployment capi-quickstart-md-0",
		"create MachineSet capi-quickstart-md-0-adopted",
		"create Machine " + kubeWorker1 + " + create Machine " + kubeWorker2,
		"create OpenStackMachineTemplate capi-quickstart-md-0",
		"create OpenStackMachine " + kubeWorker1 + " + create OpenStackMachine " + kubeWorker2,
		"unpause MachineDeployment capi-quickstart-md-0 + unpause MachineSet capi-quickstart-md-0-adopted + unpause Machine " + kubeWorker1 + " + unpause Machine " + kubeWorker2,
		"wait MachineDeployment capi-quickstart-md-0",
	}
	if !slices.Equal(ran, want) {
		t.Errorf("groups run:\n  %s\nwant:\n  %s", strings.Join(ran, "\n  "), strings.Join(want, "\n  "))
	}
	kubeCheckAdopted(t, mgmt.Client, workload)
}

// runAdoption observes, plans and runs the next runnable group, again and
// again, until nothing is left: adjust edits each snapshot before it is
// planned from, run carries out one step. It returns one line per group
// run ("action Kind name + ...") and the last plan.
func runAdoption(t *testing.T, ctx context.Context, plan *v1alpha1.MigrationPlan, obs *observer.Observer,
	adjust func(*observed.Snapshot), run func(planner.Step)) ([]string, *planner.Result) {
	t.Helper()
	var ran []string
	for round := 0; ; round++ {
		if round > 40 {
			t.Fatalf("no end after %d groups:\n%s", round, strings.Join(ran, "\n"))
		}
		snap, err := obs.Observe(ctx, plan, observed.Record{})
		if err != nil {
			t.Fatalf("observe: %v", err)
		}
		adjust(snap)
		res, err := planner.Plan(plan, snap)
		if err != nil {
			t.Fatal(err)
		}
		g := res.Next()
		if g == nil {
			return ran, res
		}
		var line []string
		for _, st := range g.Steps {
			line = append(line, st.Action+" "+st.Target.Kind+" "+st.Target.Name)
			run(st)
		}
		ran = append(ran, strings.Join(line, " + "))
	}
}

// kubeRunTwice executes a step twice, as a redelivery would, and fails the
// test on an error or a report that shows a secret. A wait step meets the
// stand-in of the controller it waits for, which reports after the wait
// has begun, so that the wait sees the change through its watch.
func kubeRunTwice(t *testing.T, exec *executor.KubeExecutor, c client.Client, ev *events.StepEvent) {
	t.Helper()
	ctx := context.Background()
	standIn := make(chan error, 1)
	if ev.Step.Action == "wait" {
		go func() {
			time.Sleep(300 * time.Millisecond)
			standIn <- kubeStandIn(ctx, c, ev.Step.Target)
		}()
	} else {
		standIn <- nil
	}
	for attempt := 1; attempt <= 2; attempt++ {
		rep, err := exec.Execute(ctx, ev)
		if err != nil {
			t.Fatalf("%s, attempt %d: %v", ev.Step, attempt, err)
		}
		if rep.Message == "" || strings.Contains(rep.Message, kubeSecretValue) {
			t.Errorf("%s, attempt %d: report %q is empty or shows a secret", ev.Step.Key, attempt, rep.Message)
		}
		t.Logf("%s (attempt %d): %s", ev.Step.Key, attempt, rep.Message)
	}
	if err := <-standIn; err != nil {
		t.Fatalf("stand-in for %s: %v", ev.Step.Target, err)
	}
}

// kubeStandIn plays the controller a wait step waits for.
func kubeStandIn(ctx context.Context, c client.Client, target planner.Target) error {
	key := client.ObjectKey{Namespace: target.Namespace, Name: target.Name}
	switch target.Kind {
	case "OpenStackCluster":
		return capoStandIn(ctx, c, key)
	case "KubeadmControlPlane", "MachineDeployment":
		return capiStandIn(ctx, c, target.Kind, key)
	}
	return fmt.Errorf("no stand-in for %s", target.Kind)
}

// capoStandIn stands in for CAPO's OpenStackCluster controller, which
// reports the cluster ready once its network, security groups and
// endpoint exist.
func capoStandIn(ctx context.Context, c client.Client, key client.ObjectKey) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var osc infrav1.OpenStackCluster
		if err := c.Get(ctx, key, &osc); err != nil {
			return err
		}
		osc.Status.Ready = true
		return c.Status().Update(ctx, &osc)
	})
}

// capiStandIn stands in for CAPI's KubeadmControlPlane and
// MachineDeployment controllers once they have taken over the adopted
// machines: every replica ready and up to date, the spec observed.
func capiStandIn(ctx context.Context, c client.Client, kind string, key client.ObjectKey) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		switch kind {
		case "KubeadmControlPlane":
			var kcp controlplanev1.KubeadmControlPlane
			if err := c.Get(ctx, key, &kcp); err != nil {
				return err
			}
			n := *kcp.Spec.Replicas
			kcp.Status.Replicas, kcp.Status.ReadyReplicas, kcp.Status.UpdatedReplicas, kcp.Status.UnavailableReplicas = n, n, n, 0
			kcp.Status.ObservedGeneration, kcp.Status.Ready, kcp.Status.Initialized = kcp.Generation, true, true
			return c.Status().Update(ctx, &kcp)
		default:
			var md clusterv1.MachineDeployment
			if err := c.Get(ctx, key, &md); err != nil {
				return err
			}
			n := *md.Spec.Replicas
			md.Status.Replicas, md.Status.ReadyReplicas, md.Status.UpdatedReplicas, md.Status.AvailableReplicas, md.Status.UnavailableReplicas = n, n, n, n, 0
			md.Status.ObservedGeneration = md.Generation
			return c.Status().Update(ctx, &md)
		}
	})
}

// kubeWorkloadEndpoint is where the workload API server listens: the
// endpoint the Cluster must keep.
func kubeWorkloadEndpoint(t *testing.T, workload *testenv.Kube) clusterv1.APIEndpoint {
	t.Helper()
	u, err := url.Parse(workload.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	var port int32
	if _, err := fmt.Sscan(u.Port(), &port); err != nil {
		t.Fatalf("port of %s: %v", workload.Config.Host, err)
	}
	return clusterv1.APIEndpoint{Host: u.Hostname(), Port: port}
}
