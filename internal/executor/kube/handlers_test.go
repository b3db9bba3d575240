package kube

import (
	"testing"

	"github.com/ferry-dev/ferry/internal/step"
)

// TestKubeHandlesEveryPlannedStep: every action and kind the planner gives
// the kube executor (grep ExecKube in internal/planner) has a handler, so
// that no planned step meets "no action" at run time.
func TestKubeHandlesEveryPlannedStep(t *testing.T) {
	e := &Executor{}
	for _, tc := range []struct {
		action step.Action
		kinds  []string
	}{
		{"copy-secret", []string{"Secret"}},
		{"create", []string{"Cluster", "OpenStackCluster", "KubeadmConfig", "KubeadmControlPlane", "Machine",
			"OpenStackMachineTemplate", "OpenStackMachine", "KubeadmConfigTemplate", "MachineDeployment", "MachineSet"}},
		{"patch", []string{"Cluster", "KubeadmControlPlane", "KamajiControlPlane", "MachineDeployment", "Machine", "MachineSet"}},
		{"pause", []string{"Cluster", "MachineDeployment"}},
		{"unpause", []string{"Cluster", "Machine", "KubeadmControlPlane", "MachineDeployment", "MachineSet"}},
		{"wait", []string{"OpenStackCluster", "KubeadmControlPlane", "KamajiControlPlane", "MachineDeployment"}},
		{"delete", []string{"MachineDeployment"}},
	} {
		for _, kind := range tc.kinds {
			if e.handlerFor(tc.action, kind) == nil {
				t.Errorf("no handler for %s %s", tc.action, kind)
			}
		}
	}
	for _, tc := range []struct {
		action step.Action
		kind   string
	}{{"create", "Secret"}, {"delete", "Cluster"}, {"wait", "Machine"}, {"pause", "Machine"}, {"apply", "Manifest"}} {
		if e.handlerFor(tc.action, tc.kind) != nil {
			t.Errorf("a handler for %s %s, which the kube executor must refuse", tc.action, tc.kind)
		}
	}
}
