package events

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/ferry-dev/ferry/internal/step"
)

// Streams and subjects (docs/architecture.md, "Events on the bus").
const (
	// StreamSteps is the work queue of runnable steps.
	StreamSteps = "FERRY_STEPS"
	// StreamResults keeps results and progress for audit.
	StreamResults = "FERRY_RESULTS"
	// StepsPrefix and ResultsPrefix start the subjects of the streams:
	// ferry.steps.<executor-kind>.<plan> and ferry.results.<plan>.
	StepsPrefix   = "ferry.steps."
	ResultsPrefix = "ferry.results."
	// WakeSubject carries no stream: a reconciler replica that a forge's
	// webhook reached publishes an empty message on it, and the replica
	// that leads wakes its loop, so that a webhook works whichever
	// replica the Service sent it to.
	WakeSubject = "ferry.wake"
)

// Event types. The version is part of the type: a consumer that meets a
// type it does not know terminates the message and reports it, rather than
// guessing at its fields. step.v2 carries the step's inputs where v1
// carried the whole plan: an executor of one version terminates a step
// of the other, and the reconciler publishes it again once it is stale.
const (
	TypeStep   = "ferry.dev/step.v2"
	TypeResult = "ferry.dev/result.v1"
)

// StepSubject is the subject a step for an executor kind and plan is
// published on.
func StepSubject(executor step.Kind, plan string) string {
	return StepsPrefix + string(executor) + "." + plan
}

// ResultSubject is the subject of a plan's results.
func ResultSubject(plan string) string { return ResultsPrefix + plan }

// StepID identifies one step of one plan at one revision. It is the
// Nats-Msg-Id of the step's message, so that publishing the same step
// again within the duplicate window is dropped by JetStream.
func StepID(plan, revision, phase, key string) string {
	sum := sha256.Sum256([]byte(plan + "\x00" + revision + "\x00" + phase + "\x00" + key))
	return hex.EncodeToString(sum[:16])
}

// RetryID is the ID of a step published again by the n-th retry a
// person asked for: a new message for JetStream, which would drop the
// step's own ID as a duplicate within its window.
func RetryID(id string, n int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00retry\x00%d", id, n)))
	return hex.EncodeToString(sum[:16])
}

// StepEvent asks an executor to carry out one step. It carries the step
// and its inputs, which the planner resolved from the plan, and not the
// plan: an executor reads only what the step needs, never a plan field.
// It never carries a secret's value.
type StepEvent struct {
	Type string `json:"type"`
	// ID is StepID(Plan, Revision, Step.Phase, Step.Key).
	ID string `json:"id"`
	// Plan is the plan's name; Revision the Git revision it was planned at.
	Plan     string `json:"plan"`
	Revision string `json:"revision"`
	// Step is what to do, with the parameters people read.
	Step step.Step `json:"step"`
	// Inputs are what the executor needs of the plan besides the step's
	// parameters (step.Inputs): the step's own Inputs, which its JSON
	// leaves out.
	Inputs step.Inputs `json:"inputs"`
	// PublishedAt is when the reconciler published the step.
	PublishedAt time.Time `json:"publishedAt"`
}

// NewStepEvent builds the event for a step the planner planned for plan
// at revision. The step's inputs move to the event's Inputs, so that the
// event holds them once, where the executor reads them.
func NewStepEvent(plan, revision string, s step.Step, now time.Time) *StepEvent {
	ev := &StepEvent{
		Type:        TypeStep,
		ID:          StepID(plan, revision, s.Phase, s.Key),
		Plan:        plan,
		Revision:    revision,
		Step:        s,
		PublishedAt: now,
	}
	if s.Inputs != nil {
		ev.Inputs = *s.Inputs
		ev.Step.Inputs = nil
	}
	return ev
}

// Outcome is what became of a step attempt.
type Outcome string

const (
	// Succeeded: the step's effect is present.
	Succeeded Outcome = "Succeeded"
	// Retrying: the attempt failed with a retryable error; the step is
	// redelivered after a back-off.
	Retrying Outcome = "Retrying"
	// Failed: the step failed for good, with a terminal error or after its
	// last delivery. A person must look.
	Failed Outcome = "Failed"
)

// Resource is something an executor created that only a record can tell
// apart from what the user made (an OpenStack keypair): the status keeps
// it, and clean-up removes it.
type Resource struct {
	Kind string `json:"kind"`
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
}

// ResourceKeypair is the Kind of a Resource that is an OpenStack keypair
// (the openstack package's name for it too).
const ResourceKeypair = "keypair"

// Report is what an executor says of a step it carried out.
type Report struct {
	// Message says what was done, for people: "created Cluster default/c1".
	Message string `json:"message,omitempty"`
	// Created lists resources to record.
	Created []Resource `json:"created,omitempty"`
}

// ResultEvent reports one attempt at a step.
type ResultEvent struct {
	Type     string    `json:"type"`
	StepID   string    `json:"stepID"`
	Plan     string    `json:"plan"`
	Revision string    `json:"revision"`
	Phase    string    `json:"phase"`
	StepKey  string    `json:"stepKey"`
	Executor step.Kind `json:"executor"`
	// Action and Target are the step's, as its event named them, so that
	// a result of a step the reader never planned (a reconciler that
	// restarted while the step ran) is shown as the step was.
	Action  step.Action `json:"action,omitempty"`
	Target  string      `json:"target,omitempty"`
	Outcome Outcome     `json:"outcome"`
	// Attempt counts deliveries of the step, from 1.
	Attempt int `json:"attempt"`
	// Duration of the attempt.
	Duration time.Duration `json:"duration"`
	Report
	// Error is the error of a failed or retried attempt; it never holds a
	// secret (executors do not put values in errors).
	Error string `json:"error,omitempty"`
	// Terminal is true when the error needs a person: no retry follows.
	Terminal bool `json:"terminal,omitempty"`
	// At is when the attempt ended.
	At time.Time `json:"at"`
}
