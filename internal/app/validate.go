package app

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/ferry-dev/ferry/internal/planfile"
)

// ValidateConfig is the configuration of `reconciler validate`.
type ValidateConfig struct {
	Streams
	// Paths are plan files, or directories that stand for the .yaml and
	// .yml files under them.
	Paths []string
}

// Validate checks plan files offline, as the reconciler does before it
// plans: strict decoding, field rules and the rules of the strategy and
// control-plane provider. Each problem goes to ErrOut as file:line: field:
// message; the error counts them.
func Validate(_ context.Context, cfg ValidateConfig) error {
	if len(cfg.Paths) == 0 {
		return usageErrorf("name at least one plan file or directory")
	}
	files, err := loadPlans(cfg.Paths, cfg.ErrOut)
	if err != nil {
		return err
	}
	for _, f := range files {
		fmt.Fprintf(cfg.Out, "%s: plan %s is valid (%s, %s)\n", f.Path, f.Plan.Metadata.Name, f.Plan.Spec.Strategy, f.Plan.Spec.Target.ControlPlane.Provider)
	}
	return nil
}

// loadPlans decodes the plan files named by paths. Invalid plans have
// their problems printed to problems and fail; unreadable paths are a
// UsageError.
func loadPlans(paths []string, problems io.Writer) ([]*planfile.File, error) {
	files, err := planfile.LoadPaths(paths)
	var errs planfile.Errors
	switch {
	case errors.As(err, &errs):
		for _, p := range errs {
			fmt.Fprintln(problems, p)
		}
		return nil, fmt.Errorf("%d problem(s); %d plan(s) valid", len(errs), len(files))
	case err != nil:
		return nil, &UsageError{Err: err}
	case len(files) == 0:
		return nil, fmt.Errorf("no .yaml or .yml files in %v", paths)
	}
	return files, nil
}
