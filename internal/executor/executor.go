package executor

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/failure"
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

// FieldManager is the field manager of every write ferry's executors make,
// in the management cluster and in workload clusters, so that a person
// can tell ferry's changes from others' (and server-side apply owns its
// fields as "ferry").
const FieldManager = "ferry"

// WriteError wraps an error of a write: a conflict means someone else
// changed the object since it was read, which the next attempt re-reads;
// an invalid object is a defect no retry fixes.
func WriteError(what string, err error) error {
	switch {
	case apierrors.IsConflict(err):
		return fmt.Errorf("%s: changed by someone else meanwhile, the next attempt reads it again: %w", what, err)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsForbidden(err):
		return failure.Terminal(fmt.Errorf("%s: %w", what, err))
	}
	return fmt.Errorf("%s: %w", what, err)
}
