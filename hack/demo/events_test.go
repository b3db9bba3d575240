package main

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferry-dev/ferry/internal/clusterevents"
)

// TestEventsTable: the demo prints the Cluster's Events as kubectl
// describe does, a repeated one with its count.
func TestEventsTable(t *testing.T) {
	now := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	events := []corev1.Event{
		{Type: "Normal", Reason: "PhaseRunning", Count: 2, FirstTimestamp: at(9 * time.Minute), LastTimestamp: at(2 * time.Minute),
			Source: corev1.EventSource{Component: "ferry-reconciler"}, Message: "Phase cluster is running (approved by bob in #1)"},
		{Type: "Warning", Reason: "StepFailed", Count: 1, FirstTimestamp: at(5 * time.Minute), LastTimestamp: at(5 * time.Minute),
			Source: corev1.EventSource{Component: "ferry-reconciler"}, Message: "Step kube: copy-secret Secret default/c of phase cluster failed: an outage"},
	}
	want := "Events:\n" +
		"  Type     Reason        Age              From              Message\n" +
		"  ----     ------        ----             ----              -------\n" +
		"  Normal   PhaseRunning  2m (x2 over 9m)  ferry-reconciler  Phase cluster is running (approved by bob in #1)\n" +
		"  Warning  StepFailed    5m               ferry-reconciler  Step kube: copy-secret Secret default/c of phase cluster failed: an outage\n"
	if got := eventsTable(events, now); got != want {
		t.Errorf("eventsTable:\n%s\nwant:\n%s", got, want)
	}
	if got := eventsTable(nil, now); got != "Events:  <none>\n" {
		t.Errorf("eventsTable(nil) = %q", got)
	}
}

// TestMissingSucceeded: a forward demo fails unless ferry's own
// PhaseSucceeded Event names each phase; another component's Event, or
// another phase's, does not count.
func TestMissingSucceeded(t *testing.T) {
	ferry := corev1.EventSource{Component: clusterevents.Component}
	events := []corev1.Event{
		{Reason: clusterevents.ReasonPhaseSucceeded, Source: ferry, Message: "Phase cluster succeeded (approved by bob in #1)"},
		{Reason: clusterevents.ReasonPhaseRunning, Source: ferry, Message: "Phase control-plane is running"},
		{Reason: clusterevents.ReasonPhaseSucceeded, Source: corev1.EventSource{Component: "someone-else"}, Message: "Phase workers succeeded"},
		{Reason: clusterevents.ReasonPhaseSucceeded, Source: ferry, Message: "Phase cluster-extra succeeded"},
	}
	got := missingSucceeded(events, []string{"cluster", "control-plane", "workers"})
	if want := []string{"control-plane", "workers"}; !slices.Equal(got, want) {
		t.Errorf("missing %v, want %v", got, want)
	}
	if got := missingSucceeded(nil, nil); len(got) != 0 {
		t.Errorf("no phases asked: missing %v", got)
	}
}
