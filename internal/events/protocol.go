package events

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/ferry-dev/ferry/api/v1alpha1"
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
// guessing at its fields.
const (
	TypeStep   = "ferry.dev/step.v1"
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

// StepEvent asks an executor to carry out one step. It carries the plan
// (plans hold no secrets) so that the executor builds objects from the same
// input the planner saw, and never a secret's value.
type StepEvent struct {
	Type string `json:"type"`
	// ID is StepID(Plan, Revision, Step.Phase, Step.Key).
	ID string `json:"id"`
	// Plan is the plan's name; Revision the Git revision it was planned at.
	Plan     string `json:"plan"`
	Revision string `json:"revision"`
	// Step is what to do.
	Step step.Step `json:"step"`
	// Spec is the validated, defaulted plan at Revision.
	Spec *v1alpha1.MigrationPlan `json:"spec"`
	// PublishedAt is when the reconciler published the step.
	PublishedAt time.Time `json:"publishedAt"`
}

// NewStepEvent builds the event for a planned step.
func NewStepEvent(p *v1alpha1.MigrationPlan, revision string, s step.Step, now time.Time) *StepEvent {
	return &StepEvent{
		Type:        TypeStep,
		ID:          StepID(p.Metadata.Name, revision, s.Phase, s.Key),
		Plan:        p.Metadata.Name,
		Revision:    revision,
		Step:        s,
		Spec:        p,
		PublishedAt: now,
	}
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
