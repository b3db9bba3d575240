//go:build openstack

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/ostest"
)

// checkPlanOnCloud runs `reconciler plan` for the seed 000 cluster of f,
// whose nodes run on servers of the local OpenStack, before anything is
// migrated (TestRunOpenStack's world): the plan names the cloud's real
// networks, flavor and image, and the steps carry the servers' provider
// IDs, looked up in Nova by node name.
func checkPlanOnCloud(t *testing.T, f *ostest.Adoptable) {
	t.Helper()
	mgmt, cp := f.Mgmt, f.ControlPlane

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, mgmt.Kubeconfig(t), 0o600); err != nil {
		t.Fatal(err)
	}
	plan := f.Plan("control-plane", "")
	planFile := filepath.Join(dir, "capi-quickstart.yaml")
	if err := os.WriteFile(planFile, []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	out := runPlan(t, planFile, kubeconfig)
	assertSteps(t, out, "cluster", []string{
		"ensure-keypair Keypair capi-key-" + f.Suffix, // the cloud says it is missing
		"create Cluster capi-quickstart",
		"create OpenStackCluster capi-quickstart",
		"unpause Cluster capi-quickstart",
		"wait OpenStackCluster capi-quickstart",
	})
	// Every adopted node's Machine carries its server's provider ID.
	found := 0
	for _, g := range out.Result.Phase("control-plane").Groups {
		for _, s := range g.Steps {
			if s.Action == step.Create && s.Target.Kind == step.Machine {
				if want := step.ProviderIDPrefix + f.Servers[s.Target.Name]; s.Params[step.ParamProviderID] != want {
					t.Errorf("Machine %s providerID = %q, want %s", s.Target.Name, s.Params[step.ParamProviderID], want)
				}
				found++
			}
		}
	}
	if found != len(cp) {
		t.Errorf("%d control-plane Machines in the plan, want %d", found, len(cp))
	}
	if strings.Contains(out.Result.Phase("control-plane").Reason, "no Nova server") {
		t.Errorf("control-plane: %s", out.Result.Phase("control-plane").Reason)
	}

	// A plan that asks CAPO for an API load balancer is refused before
	// anything is created: the local cloud has no Octavia.
	lb := strings.Replace(plan, "  target:\n", "  target:\n    apiServer: {loadBalancer: true}\n", 1)
	if err := os.WriteFile(planFile, []byte(lb), 0o644); err != nil {
		t.Fatal(err)
	}
	out = runPlan(t, planFile, kubeconfig)
	if ph := out.Result.Phase("cluster"); ph.State != "Blocked" || !strings.Contains(ph.Reason, "lists no load-balancer service (Octavia)") {
		t.Errorf("cluster phase with loadBalancer: true on a cloud without Octavia: %s, %q; want Blocked by the preflight", ph.State, ph.Reason)
	}
}
