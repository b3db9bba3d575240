package step_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/step"
)

// TestKey: the bytes of a key, which message IDs, statuses and the record
// of passed checks hold, and which therefore never change.
func TestKey(t *testing.T) {
	for _, tc := range []struct {
		phase  string
		action step.Action
		target step.Target
		want   string
	}{
		{"cutover", step.Probe, step.Target{Kind: step.Node, Name: "web-0"}, "cutover/probe/node/web-0"},
		{"cluster", step.CopySecret, step.Target{Kind: step.Secret, Namespace: "default", Name: "c-sa"}, "cluster/copy-secret/secret/c-sa"},
		{"control-plane", step.Apply, step.Target{Kind: step.Manifest, Name: "manifests/ccm.yaml"}, "control-plane/apply/manifest/manifests/ccm.yaml"},
		{"cleanup", step.Delete, step.Target{Kind: step.TaggedResources, Name: "ferry-plan=c"}, "cleanup/delete/taggedresources/ferry-plan=c"},
	} {
		if got := step.Key(tc.phase, tc.action, tc.target); got != tc.want {
			t.Errorf("Key(%s, %s, %s) = %q; want %q", tc.phase, tc.action, tc.target, got, tc.want)
		}
	}
}

// TestParseKeyRoundTrip: every action on every target kind reads back as
// it was built, the kind spelt as this package spells it; a name may hold
// slashes.
func TestParseKeyRoundTrip(t *testing.T) {
	kinds := []string{step.Secret, step.Cluster, step.OpenStackCluster, step.OpenStackMachineTemplate, step.OpenStackMachine,
		step.OpenStackServer, step.KubeadmControlPlane, step.KamajiControlPlane, step.KubeadmConfig, step.KubeadmConfigTemplate,
		step.Machine, step.MachineSet, step.MachineDeployment, step.Node, step.Service, step.Manifest, step.MigrationPlan,
		step.Cloud, step.Keypair, step.TaggedResources}
	for _, action := range step.Actions() {
		for _, kind := range kinds {
			for _, name := range []string{"n", "manifests/cni/calico.yaml"} {
				target := step.Target{Kind: kind, Name: name}
				key := step.Key("workers", action, target)
				phase, gotAction, gotTarget, err := step.ParseKey(key)
				if err != nil || phase != "workers" || gotAction != action || gotTarget != target {
					t.Errorf("ParseKey(%q) = %q, %q, %+v, %v; want workers, %q, %+v", key, phase, gotAction, gotTarget, err, action, target)
				}
			}
		}
	}
}

// TestParseKeyMalformed: a string that is not a key is an error naming it.
func TestParseKeyMalformed(t *testing.T) {
	for _, key := range []string{
		"",
		"cutover",
		"cutover/probe/node",
		"cutover/probe/node/",
		"/probe/node/web-0",
		"cutover//node/web-0",
		"cutover/probe//web-0",
		"cutover/noop/node/web-0",   // no such action
		"cutover/probe/gizmo/web-0", // no such target kind
	} {
		_, _, _, err := step.ParseKey(key)
		if !errors.Is(err, step.ErrMalformedKey) || !strings.Contains(err.Error(), `"`+key+`"`) {
			t.Errorf("ParseKey(%q): error %v; want one naming the key and wrapping ErrMalformedKey", key, err)
		}
	}
}
