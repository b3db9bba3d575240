package executor

import (
	"context"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/step"
)

// Executor carries out the steps of one kind (events.StepEvent.Step.Executor
// is its Kind). Execute must be idempotent: run twice, the same end state and
// no error. It returns a report for people, or an error that is terminal
// (failure.Terminal: a person must act, no retry) or retryable (anything
// else: the step is redelivered after a back-off). Execute may run for as
// long as its step waits; the caller keeps the message alive meanwhile and
// cancels ctx at shutdown or at the step's timeout.
type Executor interface {
	Kind() step.Kind
	Execute(ctx context.Context, step *events.StepEvent) (events.Report, error)
}
