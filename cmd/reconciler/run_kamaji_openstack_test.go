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
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/ostest"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestRunKamajiOpenStack is a seed 004 migration driven through pull
// requests, as TestRunOpenStack drives seed 000's, on Gitea with squash
// merges (pull request 1 has two commits): a cluster whose control
// plane Kamaji hosts (a KamajiControlPlane in the management cluster; the
// workload API server stands for the hosted one and is the Cluster's
// endpoint) and whose workers run on servers of the local OpenStack moves
// from the Docker provider onto CAPO. Each worker server runs a real
// kubelet (ostest.NewHostedOn), registered with the hosted API server
// without a provider ID; the move gives each Node its server's
// (kubeletNodes, before and after). `reconciler run` acts only on what
// pull requests merge; the real Cluster API (core, kubeadm bootstrap) and
// CAPO managers act on what it creates. The one stand-in is the Kamaji
// controller (testenv.StartKamajiStandIn: it reports the hosted control
// plane ready, as the provider's status contract says), whose module
// cannot be built here.
//
// Pull request 1 first breaks a seed 004 rule (the kubelet address order)
// and is refused in its preview, naming the field; its fix is previewed
// and merged, and the cluster phase runs. Pull requests 2 and 3 approve
// the control plane and the workers. Then the end state: the
// OpenStackCluster ready without a load balancer or floating IP (spec and
// Neutron), the workers' servers ACTIVE with the same IDs, their Machines
// Running with nodeRefs, the MachineDeployment ready, and seed 004's rules
// on the KamajiControlPlane and the cloud controller manager.
func TestRunKamajiOpenStack(t *testing.T) {
	h := ostest.NewHostedOn(t, "kamaji-quickstart", testenv.NewHost(t))
	t.Logf("fixture: %s", h)
	mgmt := h.Mgmt
	before := h.Record(t)
	kubeletNodes(t, h.Adoptable, "before the move", func(string) string { return "" })
	testenv.StartManagers(t, mgmt)
	testenv.StartKamajiStandIn(t, mgmt)
	// Within go test's default 10 minutes, so that a wait that times out
	// fails with the reconciler's log rather than a goroutine dump.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	const planPath, ccmPath = "plans/kamaji-quickstart.yaml", "manifests/ccm.yaml"
	plan := func(approve string) string { return h.Plan(approve, ccmPath) }
	m := startMigration(t, ctx, mgmt, h.Name, testenv.MergeSquash,
		map[string]string{planPath: plan(`""`), ccmPath: testenv.CCMManifest},
		"--interval", "2s", "--comment-interval", "200ms")
	bob, alice := testenv.GiteaReviewer, testenv.GiteaMaintainer
	S, P := status.PhaseSucceeded, status.PhasePending

	refuseBrokenRule(t, m, h, plan("cluster"))
	m.push("Keep the kubelet address order of seed 004", plan("cluster"))
	preview := m.comment(m.pr, "preview", "Steps of phase cluster:")
	for _, want := range []string{"patch Cluster default/kamaji-quickstart", "create OpenStackCluster default/kamaji-quickstart", "apiServerLoadBalancer=false", "disableAPIServerFloatingIP=true"} {
		if !strings.Contains(preview, want) {
			t.Errorf("preview of #1 lacks %q:\n%s", want, preview)
		}
	}
	m.merge("cluster", bob, map[string]status.PhaseState{"cluster": S, "control-plane": P})
	var cl clusterv1.Cluster
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: h.Name}, &cl); err != nil || cl.Spec.Paused || cl.Spec.InfrastructureRef.Kind != "OpenStackCluster" {
		t.Fatalf("Cluster after phase cluster: paused=%t, infrastructureRef %v, %v", cl.Spec.Paused, cl.Spec.InfrastructureRef, err)
	}

	preview = m.open("Approve control-plane", "control-plane", plan("control-plane"))
	for _, want := range []string{"patch KamajiControlPlane default/" + h.ControlPlaneName, "nodeSelector=none"} {
		if !strings.Contains(preview, want) {
			t.Errorf("preview of #2 lacks %q:\n%s", want, preview)
		}
	}
	m.merge("control-plane", alice, map[string]status.PhaseState{"cluster": S, "control-plane": S, "workers": P})

	m.open("Approve workers", "workers", plan("workers"))
	_, merge3 := m.merge("workers", alice, map[string]status.PhaseState{"cluster": S, "control-plane": S, "workers": S})
	unpaused := time.Now() // the workers' unpause was before this
	m.successStatuses(merge3, 3)

	// What the real controllers made of it.
	for _, c := range h.VerifyUntil(ctx, before, unpaused, 2*time.Minute) {
		t.Log(c)
		if !c.OK {
			t.Errorf("seed 004 check failed: %s", c)
		}
	}
	kubeletNodes(t, h.Adoptable, "after the move", func(node string) string { return step.ProviderIDPrefix + h.Servers[node] })
}

// refuseBrokenRule opens pull request 1 with a plan that breaks a seed 004
// rule (Hostname first in the kubelet address order) and checks that the
// preview refuses it, naming the field, and that nothing ran: the Cluster
// is still on its Docker infrastructure.
func refuseBrokenRule(t *testing.T, m *migration, h *ostest.Hosted, plan string) {
	t.Helper()
	broken := strings.Replace(plan, "preferredAddressTypes: [InternalIP, ExternalIP, Hostname]", "preferredAddressTypes: [Hostname, InternalIP, ExternalIP]", 1)
	if broken == plan {
		t.Fatal("the plan has no preferredAddressTypes to break")
	}
	m.openPR("Approve cluster", broken)
	preview := m.comment(m.pr, "preview", "spec.target.controlPlane.kubelet.preferredAddressTypes")
	for _, want := range []string{"`plans/kamaji-quickstart.yaml`: invalid", "must be [InternalIP, ExternalIP, Hostname] with KamajiControlPlane"} {
		if !strings.Contains(preview, want) {
			t.Errorf("preview of the broken plan lacks %q:\n%s", want, preview)
		}
	}
	if strings.Contains(preview, "Steps of phase") {
		t.Errorf("preview of the broken plan lists steps:\n%s", preview)
	}
	var cl clusterv1.Cluster
	if err := h.Mgmt.Client.Get(m.ctx, client.ObjectKey{Namespace: "default", Name: h.Name}, &cl); err != nil || cl.Spec.InfrastructureRef.Kind != "DockerCluster" || cl.Spec.Paused {
		t.Errorf("Cluster after the refused plan: infrastructureRef %v, paused %t, %v; want it untouched", cl.Spec.InfrastructureRef, cl.Spec.Paused, err)
	}
}
