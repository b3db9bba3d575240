package events_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/step"
)

// TestStepEventCarriesInputsNotThePlan: the event of a planned step holds
// the step and, beside it, its inputs, once; no plan. Decoded, as an
// executor receives it, the inputs are as the planner resolved them.
func TestStepEventCarriesInputsNotThePlan(t *testing.T) {
	in := &step.Inputs{
		Cluster:      v1alpha1.ClusterRef{Namespace: "default", Name: "c1"},
		ControlPlane: step.ObjectRef{Kind: step.KubeadmControlPlane, Name: "c1-control-plane"},
		PublicKey:    "ssh-ed25519 AAAAwhole ferry@example",
	}
	s := step.Step{Key: "cluster/ensure-keypair/keypair/k", Phase: "cluster", Executor: step.OpenStack, Action: step.EnsureKeypair,
		Target: step.Target{Kind: step.Keypair, Name: "k"}, Params: step.NewParams(step.ParamPublicKey, "ssh-ed25519 ... ferry@example"), Inputs: in}
	ev := events.NewStepEvent("p1", "rev1", s, time.Now())
	if ev.Type != "ferry.dev/step.v2" || ev.Plan != "p1" || ev.ID != events.StepID("p1", "rev1", "cluster", s.Key) {
		t.Errorf("event %+v", ev)
	}
	if ev.Step.Inputs != nil || !reflect.DeepEqual(ev.Inputs, *in) {
		t.Errorf("inputs: step %+v, event %+v; want them on the event only", ev.Step.Inputs, ev.Inputs)
	}
	data, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), `"spec"`) || strings.Count(string(data), "AAAAwhole") != 1 {
		t.Errorf("event JSON %s; want no plan and the inputs once", data)
	}
	var got events.StepEvent
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Inputs, *in) || got.Step.Params.Get(step.ParamPublicKey) != "ssh-ed25519 ... ferry@example" {
		t.Errorf("decoded event %+v", got)
	}

	// A step without inputs (hand-made) has the zero inputs.
	s.Inputs = nil
	if ev := events.NewStepEvent("p1", "rev1", s, time.Now()); !reflect.DeepEqual(ev.Inputs, step.Inputs{}) {
		t.Errorf("inputs of a step without any: %+v", ev.Inputs)
	}
}
