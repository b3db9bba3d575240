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
		{step.CopySecret, []string{step.Secret}},
		{step.Create, []string{step.Cluster, step.OpenStackCluster, step.KubeadmConfig, step.KubeadmControlPlane, step.Machine,
			step.OpenStackMachineTemplate, step.OpenStackMachine, step.KubeadmConfigTemplate, step.MachineDeployment, step.MachineSet}},
		{step.Patch, []string{step.Cluster, step.KubeadmControlPlane, step.KamajiControlPlane, step.MachineDeployment, step.Machine, step.MachineSet}},
		{step.Pause, []string{step.Cluster, step.MachineDeployment}},
		{step.Unpause, []string{step.Cluster, step.Machine, step.KubeadmControlPlane, step.MachineDeployment, step.MachineSet}},
		{step.Wait, []string{step.OpenStackCluster, step.KubeadmControlPlane, step.KamajiControlPlane, step.MachineDeployment}},
		{step.Delete, []string{step.MachineDeployment}},
		{step.Remove, []string{step.Cluster, step.OpenStackCluster, step.KubeadmConfig, step.KubeadmControlPlane, step.Machine, step.OpenStackServer,
			step.OpenStackMachineTemplate, step.OpenStackMachine, step.KubeadmConfigTemplate, step.MachineDeployment, step.MachineSet, step.Secret}},
		{step.Release, []string{step.Secret, step.KamajiControlPlane}},
		{step.Restore, []string{step.KamajiControlPlane}},
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
	}{{step.Create, step.Secret}, {step.Delete, step.Cluster}, {step.Wait, step.Machine}, {step.Pause, step.Machine}, {step.Apply, step.Manifest}} {
		if e.handlerFor(tc.action, tc.kind) != nil {
			t.Errorf("a handler for %s %s, which the kube executor must refuse", tc.action, tc.kind)
		}
	}
}
