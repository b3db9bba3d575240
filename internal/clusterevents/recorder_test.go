package clusterevents

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestRecorderOnAPIServer writes Events through a real API server and
// reads back what `kubectl describe cluster` would show: each Event on the
// Cluster, from ferry-reconciler, with its type, reason and message; a
// repeat counted on the first Event, within a process and across a
// restart (a new Recorder, whose client-go correlator starts empty); and
// nothing for a Cluster that does not exist.
func TestRecorderOnAPIServer(t *testing.T) {
	kube := testenv.StartKube(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "capi-quickstart"}}
	if err := kube.Client.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	running := normal(ReasonPhaseRunning, "Phase cluster is running (approved by bob in #1)")
	stepFailed := warning(ReasonStepFailed, "Step kube: copy-secret Secret default/capi-quickstart-cloud-config of phase cluster failed: an outage")

	first, stopFirst := context.WithCancel(ctx)
	r := NewRecorder(first, cs, kube.Client)
	r.Record(ctx, "default/gone", []Event{running})
	r.Record(ctx, "default/capi-quickstart", []Event{running, stepFailed})
	waitEvents(t, ctx, kube.Client, "the first events", map[string]int32{ReasonPhaseRunning: 1, ReasonStepFailed: 1})
	got := events(t, ctx, kube.Client)
	for _, want := range []Event{running, stepFailed} {
		e := got[want.Reason]
		if e.Type != want.Type || e.Message != want.Message || e.Source.Component != Component ||
			e.InvolvedObject.Kind != "Cluster" || e.InvolvedObject.APIVersion != clusterv1.GroupVersion.String() {
			t.Errorf("%s event: type %s, message %q, from %s, on %s %s; want %s, %q, from %s, on the Cluster",
				want.Reason, e.Type, e.Message, e.Source.Component, e.InvolvedObject.APIVersion, e.InvolvedObject.Kind, want.Type, want.Message, Component)
		}
	}
	name := got[ReasonPhaseRunning].Name

	// The same transition again in this process: counted by client-go.
	r.Record(ctx, "default/capi-quickstart", []Event{running})
	waitEvents(t, ctx, kube.Client, "the repeat counted", map[string]int32{ReasonPhaseRunning: 2, ReasonStepFailed: 1})

	// A restart that reports it once more: counted on the same Event.
	stopFirst()
	second, stopSecond := context.WithCancel(ctx)
	defer stopSecond()
	NewRecorder(second, cs, kube.Client).Record(ctx, "default/capi-quickstart", []Event{running})
	waitEvents(t, ctx, kube.Client, "the restart's repeat counted", map[string]int32{ReasonPhaseRunning: 3, ReasonStepFailed: 1})
	if e := events(t, ctx, kube.Client)[ReasonPhaseRunning]; e.Name != name {
		t.Errorf("the restart wrote a new Event %s; want the count of %s raised", e.Name, name)
	}

	var all corev1.EventList
	if err := kube.Client.List(ctx, &all, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	for _, e := range all.Items {
		if e.InvolvedObject.Name == "gone" {
			t.Errorf("an event on a Cluster that does not exist: %s %q", e.Reason, e.Message)
		}
	}
}

// events returns the Cluster's Events by reason, failing on two Events
// with one reason: a repeat must be counted, not written again.
func events(t *testing.T, ctx context.Context, c client.Reader) map[string]corev1.Event {
	t.Helper()
	list, err := List(ctx, c, "default/capi-quickstart")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.Event{}
	for _, e := range list {
		if _, dup := out[e.Reason]; dup {
			t.Fatalf("two %s Events on the Cluster: %s", e.Reason, describe(list))
		}
		out[e.Reason] = e
	}
	return out
}

// waitEvents waits until the Cluster's Events are want (count by reason).
func waitEvents(t *testing.T, ctx context.Context, c client.Reader, what string, want map[string]int32) {
	t.Helper()
	for {
		got := map[string]int32{}
		for reason, e := range events(t, ctx, c) {
			got[reason] = e.Count
		}
		if fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s: events (reason: count) %v; want %v", what, got, want)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func describe(list []corev1.Event) string {
	var b strings.Builder
	for _, e := range list {
		fmt.Fprintf(&b, "\n  %s %s x%d %s: %s", e.Name, e.Type, e.Count, e.Reason, e.Message)
	}
	return b.String()
}
