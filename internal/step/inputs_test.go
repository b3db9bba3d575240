package step_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/step"
)

// TestInputsJSON: inputs survive JSON, as the step event carries them,
// an empty node selector staying empty (none) and a nil one nil (the
// manifest's); a step's own JSON and String leave them out.
func TestInputsJSON(t *testing.T) {
	for _, tc := range []struct {
		name     string
		selector map[string]string
		wantNil  bool
	}{{"empty: none", map[string]string{}, false}, {"nil: the manifest's", nil, true}, {"set", map[string]string{"a": "b"}, false}} {
		in := step.Inputs{
			Cluster:    v1alpha1.ClusterRef{Namespace: "default", Name: "c"},
			Scheduling: &step.Scheduling{NodeSelector: tc.selector, Tolerations: []v1alpha1.Toleration{{Key: "k", Operator: "Exists", Effect: "NoSchedule"}}},
		}
		data, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		var got step.Inputs
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatal(err)
		}
		if sel := got.Scheduling.NodeSelector; (sel == nil) != tc.wantNil || len(sel) != len(tc.selector) {
			t.Errorf("%s: node selector %#v after JSON; want %#v", tc.name, sel, tc.selector)
		}
		if got.Cluster != in.Cluster || got.Scheduling.Tolerations[0] != in.Scheduling.Tolerations[0] {
			t.Errorf("%s: %+v after JSON; want %+v", tc.name, got, in)
		}
	}

	s := step.Step{Key: "cluster/ensure-keypair/keypair/k", Executor: step.OpenStack, Action: step.EnsureKeypair,
		Target: step.Target{Kind: step.Keypair, Name: "k"}, Inputs: &step.Inputs{PublicKey: "ssh-ed25519 AAAAwhole ferry@example"}}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, shown := range []string{string(data), s.String()} {
		if strings.Contains(shown, "AAAAwhole") || strings.Contains(shown, "inputs") {
			t.Errorf("the step shows its inputs: %s", shown)
		}
	}
}
