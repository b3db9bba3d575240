// Package clusterevents writes ferry's progress as Kubernetes Events on the
// CAPI Cluster a plan migrates, where `kubectl describe cluster` and
// event-based alerting find it: one Event per phase transition and per
// step that failed for good.
//
// Transitions is pure (two states in, Events out); Recorder is the side
// effect, through client-go's event recorder.
//
// It owns what an Event says (its reason, type and message, which holds
// no secret: every message is scrubbed by internal/redact), how a
// transition is told from a repeat (Marks), and the Event names that let
// a restarted reconciler count a repeat on the Event its predecessor
// wrote instead of writing it twice. Events are a view of the
// status, which Git keeps: a batch the API server does not take is dropped
// and logged, never allowed to hold the loop back.
//
// It reads the status as internal/status's data, handed to it by the
// reconciler's status recorder; it must not import the reconciler or
// internal/app (internal/layering's rule "the commands sit on top").
package clusterevents
