//go:build openstack

package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/ostest"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestRunOpenStack is a seed 000 migration driven through three pull
// requests on a real Gitea, merged with merge commits, by ferry installed
// as users install it: from deploy/ with docs/install.md's commands
// (testenv.Install: `make image`'s image imported into a real node of
// the management cluster, the credentials' Secret, `kubectl apply -k`,
// the plan-namespace RBAC), its pods reaching the world over a network
// as in a data centre: the management API server through the kubernetes
// Service, Gitea on the network's host address, the local OpenStack's
// APIs and the workload cluster's endpoint (a floating IP) through the
// node's route to testenv.HostServices. The management and workload
// clusters are real API servers, and the real Cluster API (core, kubeadm
// bootstrap, KubeadmControlPlane) and CAPO managers act on what ferry
// creates; the nodes' servers are in the local OpenStack, and each runs
// a real kubelet in the workload cluster (ostest.NewAdoptableOn), which
// registered it without a provider ID, as kubeadm without a cloud
// provider does: the adoption gives each Node its server's
// (kubeletNodes, before and after). First, before
// anything moves, `reconciler plan` reads that world (checkPlanOnCloud).
//
// Pull request 1 approves cluster on the base layout (one pod, executors
// and NATS in process), whose pod is deleted once it took the approval
// up: the Deployment's next pod carries the phase on from the status
// branch. Then the installation moves to deploy/overlays/cluster, as a
// team outgrowing one pod would: a NATS cluster of three nats-server pods
// (testenv.StartNATSPods, TLS and a user per role), each role's Secret,
// `kubectl apply -k`; two reconcilers under leader election and three
// executors take the migration on. Pull request 2 approves the control
// plane, during which the leading reconciler's pod is deleted (the
// standby takes the Lease over), 3 the workers, during which an executor
// pod is deleted. Every pod runs under deploy/'s securityContext (its
// process's user, groups and capabilities read from the machine), and
// none restarts. The status lands on the status branch and in one
// progress comment per pull request. Then the adoption is checked
// against the world as it was before (ostest.Verify: the same servers,
// every Machine Running with its Node, nothing rolled out, no
// certificate regenerated, no stray port), and the workers are scaled up
// by one, which the real controllers build as a new server. The
// cluster's endpoint is a floating IP of its control-plane server; after
// each phase it must answer through it, and the floating IP must still be
// the server's. Last, without deploy/'s fsGroup a reconciler cannot read
// its credentials (the kubelet writes a Secret's files root-owned, and
// defaultMode 0400 leaves its user out).
func TestRunOpenStack(t *testing.T) {
	images := []string{testenv.FerryImage(t), testenv.NATSServerImage(t)}
	h := testenv.NewHost(t)
	lan := h.Network("mgmt")
	f := ostest.NewAdoptableOn(t, "capi-quickstart", testenv.KubeOptions{PKI: testenv.NewPKI(t, "mgmt"), Address: lan.HostIP, Nodes: true}, h)
	mgmt := f.Mgmt
	before := f.Record(t)
	kubeletNodes(t, f, "before the adoption", func(string) string { return "" })
	checkPlanOnCloud(t, f)
	nodes := h.StartNodes(mgmt, images, testenv.NodeSpec{Name: "mgmt-1", Network: lan})
	testenv.StartManagers(t, mgmt)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	plan := func(approve string) string {
		return f.Plan(approve, "  manifests:\n    cloudControllerManager: {path: manifests/ccm.yaml}\n")
	}
	m := startInstalledMigration(t, ctx, mgmt, nodes, lan.HostIP, "capi-quickstart", testenv.MergeCommit,
		map[string]string{"plans/capi-quickstart.yaml": plan(`""`), "manifests/ccm.yaml": testenv.CCMManifest})
	checkProcesses(t, "/usr/local/bin/reconciler run ", 1)
	bob, alice := testenv.GiteaReviewer, testenv.GiteaMaintainer
	S, P := status.PhaseSucceeded, status.PhasePending
	endpointKept := func(after string) {
		t.Helper()
		if c := f.CheckEndpoint(ctx); !c.OK {
			t.Errorf("after phase %s: %s", after, c)
		}
	}

	preview := m.open("Approve cluster", "cluster", plan("cluster"))
	if !strings.Contains(preview, "ensure-keypair Keypair capi-key-"+f.Suffix) || strings.Contains(preview, "may ferry list") {
		t.Errorf("preview of #1 lacks the keypair step or could not read the plan's namespace:\n%s", preview)
	}
	m.mergeDeleting("cluster", bob, testenv.ReconcilerApp, map[string]status.PhaseState{"cluster": S, "control-plane": P})
	var cl clusterv1.Cluster
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "capi-quickstart"}, &cl); err != nil || cl.Spec.Paused {
		t.Fatalf("Cluster after phase cluster: paused=%t, %v", cl.Spec.Paused, err)
	}
	endpointKept("cluster")

	// The clustered layout takes the migration over.
	m.installed.Cluster(ctx, testenv.StartNATSPods(t, ctx, mgmt))
	m.hookPod()
	checkProcesses(t, "/usr/local/bin/reconciler run ", 2)
	checkProcesses(t, "/usr/local/bin/reconciler executor ", 3)

	m.open("Approve control-plane", "control-plane", plan("control-plane"))
	m.mergeDeleting("control-plane", alice, testenv.ReconcilerApp, map[string]status.PhaseState{"cluster": S, "control-plane": S, "workers": P})
	endpointKept("control-plane")

	m.open("Approve workers", "workers", plan("workers"))
	merge3 := m.mergeDeleting("workers", alice, testenv.ExecutorApp, map[string]status.PhaseState{"cluster": S, "control-plane": S, "workers": S})
	unpaused := time.Now() // the workers' unpause was before this
	endpointKept("workers")
	var mds clusterv1.MachineDeploymentList
	if err := mgmt.Client.List(ctx, &mds, client.InNamespace("default")); err != nil || len(mds.Items) != 1 || mds.Items[0].Spec.Paused {
		t.Errorf("MachineDeployments after workers: %d, %v", len(mds.Items), err)
	}
	m.successStatuses(merge3, 3)
	m.installed.Serving(ctx)
	for _, app := range []string{testenv.ReconcilerApp, testenv.ExecutorApp} {
		for _, p := range m.installed.Pods(ctx, app) {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.RestartCount > 0 {
					t.Errorf("pod %s: container %s restarted %d times: %+v", p.Name, cs.Name, cs.RestartCount, cs.LastTerminationState)
				}
			}
		}
	}

	// What the real controllers made of it.
	for _, c := range f.VerifyUntil(ctx, before, unpaused, 2*time.Minute) {
		t.Log(c)
		if !c.OK {
			t.Errorf("adoption check failed: %s", c)
		}
	}
	kubeletNodes(t, f, "after the adoption", func(node string) string { return step.ProviderIDPrefix + f.Servers[node] })
	if t.Failed() {
		return
	}
	for _, c := range f.ScaleUp(ctx, "capi-quickstart-md-0") {
		t.Log(c)
		if !c.OK {
			t.Errorf("scale-up check failed: %s", c)
		}
	}

	// Without deploy/'s fsGroup a reconciler cannot read its credentials.
	m.installed.Kubectl(ctx, "-n", "ferry-system", "patch", "deployment", "ferry-reconciler", "--type=json",
		"-p", `[{"op": "remove", "path": "/spec/template/spec/securityContext/fsGroup"}]`)
	var logs string
	m.wait("a reconciler without fsGroup to fail to read its credentials", func() bool {
		logs = ""
		for _, p := range m.installed.Pods(ctx, testenv.ReconcilerApp) {
			if p.Spec.SecurityContext.FSGroup == nil {
				logs += nodes.ContainerLog("ferry-system", p.Name, "reconciler")
			}
		}
		return strings.Contains(logs, "permission denied")
	}, func() string { return "its log: " + logs })
	t.Logf("without fsGroup: %s", strings.TrimSpace(logs))
}

// kubeletNodes checks the workload cluster's Nodes at a moment (when):
// each server's node is there, registered and kept by its real kubelet
// (Ready, and a heartbeat Lease in kube-node-lease renewed within the
// last minute, which only a kubelet writes: it creates it a few seconds
// after it registers, hence the wait of up to 30 seconds), with the
// provider ID want(node). A kubeadm cluster without a cloud provider
// registers its nodes without one; the adoption gives each its server's.
func kubeletNodes(t *testing.T, f *ostest.Adoptable, when string, want func(node string) string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var problems []string
	for {
		problems = nil
		for _, name := range slices.Concat(f.ControlPlane, f.Workers) {
			var n corev1.Node
			var lease coordinationv1.Lease
			if err := f.Workload.Client.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
				problems = append(problems, fmt.Sprintf("Node %s: %v", name, err))
				continue
			}
			if err := f.Workload.Client.Get(ctx, client.ObjectKey{Namespace: "kube-node-lease", Name: name}, &lease); err != nil ||
				lease.Spec.RenewTime == nil || time.Since(lease.Spec.RenewTime.Time) > time.Minute {
				problems = append(problems, fmt.Sprintf("Node %s: its kubelet's Lease is not being renewed (%v, renewed %v)", name, err, lease.Spec.RenewTime))
			}
			ready := false
			for _, c := range n.Status.Conditions {
				ready = ready || c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
			}
			if !ready || n.Spec.ProviderID != want(name) {
				problems = append(problems, fmt.Sprintf("Node %s: Ready %t, provider ID %q; want Ready with provider ID %q", name, ready, n.Spec.ProviderID, want(name)))
			}
		}
		if len(problems) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Errorf("%s, after 30 s: %s", when, strings.Join(problems, "; "))
			return
		case <-time.After(time.Second):
		}
	}
}

// checkProcesses checks the n processes whose command line starts with
// prefix as the kernel runs them: deploy/'s runAsUser, runAsGroup and
// fsGroup (a supplementary group, through which they read their Secrets'
// 0440 files), and no capability.
func checkProcesses(t *testing.T, prefix string, n int) {
	t.Helper()
	for _, proc := range testenv.ProcessStatus(t, prefix, n) {
		for field, want := range map[string]string{"Uid": "65532\t65532\t65532\t65532", "Gid": "65532\t65532\t65532\t65532", "Groups": "65532", "CapEff": "0000000000000000"} {
			if got := proc[field]; got != want {
				t.Errorf("process %q: %s = %q; want %q (deploy/'s securityContext)", prefix, field, got, want)
			}
		}
	}
}

// phaseStates is each phase's state, for a log line.
func phaseStates(st *status.PlanStatus) string {
	var s []string
	for _, p := range st.Phases {
		s = append(s, p.Name+" "+string(p.State))
	}
	return strings.Join(s, ", ")
}
