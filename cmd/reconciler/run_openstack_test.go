//go:build openstack

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/testing/ostest"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestRunOpenStack is a seed 000 migration driven through three pull
// requests on a real Gitea, merged with merge commits, on the distributed
// layout (clustered: a three-node NATS cluster, two `reconciler run
// --forge gitea --executors=false` replicas under leader election, three
// executor replicas). The reconcilers read the plans repository, the
// approvals, the webhooks from Gitea and write comments and statuses
// there; after the first phase the leader stops and the standby carries
// the migration on. The management and
// workload clusters are real API servers, and the real Cluster API (core,
// kubeadm bootstrap, KubeadmControlPlane) and CAPO managers act on what
// ferry creates; the nodes' servers are in the local OpenStack. First,
// before anything moves, `reconciler plan` reads that world
// (checkPlanOnCloud). Pull request 1 approves cluster (preview, merge, phase runs), 2 the control
// plane, 3 the workers; the status lands on the status branch and in one
// progress comment per pull request. Then the adoption is checked against
// the world as it was before (ostest.Verify: the same servers, every
// Machine Running with its Node, nothing rolled out, no certificate
// regenerated, no stray port), and the workers are scaled up by one, which
// the real controllers build as a new server. The cluster's endpoint is a
// floating IP of its control-plane server (on a loopback subnet, so that
// the workload API server listens on it); after each phase it must answer
// through it, and the floating IP must still be the server's.
func TestRunOpenStack(t *testing.T) {
	f := ostest.NewAdoptable(t, "capi-quickstart")
	mgmt := f.Mgmt
	before := f.Record(t)
	checkPlanOnCloud(t, f)
	testenv.StartManagers(t, mgmt)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()

	plan := func(approve string) string {
		return f.Plan(approve, "  manifests:\n    cloudControllerManager: {path: manifests/ccm.yaml}\n")
	}
	m := startClusteredMigration(t, ctx, mgmt, "capi-quickstart", testenv.MergeCommit,
		map[string]string{"plans/capi-quickstart.yaml": plan(`""`), "manifests/ccm.yaml": testenv.CCMManifest},
		"--interval", "2s", "--comment-interval", "200ms")
	bob, alice := testenv.GiteaReviewer, testenv.GiteaMaintainer
	S, P := status.PhaseSucceeded, status.PhasePending

	preview := m.open("Approve cluster", "cluster", plan("cluster"))
	if !strings.Contains(preview, "ensure-keypair Keypair capi-key-"+f.Suffix) {
		t.Errorf("preview of #1 lacks the keypair step:\n%s", preview)
	}
	m.merge("cluster", bob, map[string]status.PhaseState{"cluster": S, "control-plane": P})
	var cl clusterv1.Cluster
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "capi-quickstart"}, &cl); err != nil || cl.Spec.Paused {
		t.Fatalf("Cluster after phase cluster: paused=%t, %v", cl.Spec.Paused, err)
	}
	endpointKept := func(after string) {
		t.Helper()
		if c := f.CheckEndpoint(ctx); !c.OK {
			t.Errorf("after phase %s: %s", after, c)
		}
	}
	endpointKept("cluster")

	// The leading reconciler goes, as in a rolling update: the standby
	// takes the migration over from the status branch.
	m.handOver()
	m.open("Approve control-plane", "control-plane", plan("control-plane"))
	m.merge("control-plane", alice, map[string]status.PhaseState{"cluster": S, "control-plane": S, "workers": P})
	endpointKept("control-plane")

	m.open("Approve workers", "workers", plan("workers"))
	_, merge3 := m.merge("workers", alice, map[string]status.PhaseState{"cluster": S, "control-plane": S, "workers": S})
	unpaused := time.Now() // the workers' unpause was before this
	endpointKept("workers")
	var mds clusterv1.MachineDeploymentList
	if err := mgmt.Client.List(ctx, &mds, client.InNamespace("default")); err != nil || len(mds.Items) != 1 || mds.Items[0].Spec.Paused {
		t.Errorf("MachineDeployments after workers: %d, %v", len(mds.Items), err)
	}
	m.successStatuses(merge3, 3)

	// What the real controllers made of it.
	for _, c := range f.VerifyUntil(ctx, before, unpaused, 2*time.Minute) {
		t.Log(c)
		if !c.OK {
			t.Errorf("adoption check failed: %s", c)
		}
	}
	if t.Failed() {
		return
	}
	for _, c := range f.ScaleUp(ctx, "capi-quickstart-md-0") {
		t.Log(c)
		if !c.OK {
			t.Errorf("scale-up check failed: %s", c)
		}
	}
}
