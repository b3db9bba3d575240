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
	// Output is text (a line per plan), json or yaml (a list of
	// ValidPlan).
	Output string
}

// ValidPlan is a plan file that validated.
type ValidPlan struct {
	Path     string `json:"path"`
	Plan     string `json:"plan"`
	Strategy string `json:"strategy"`
	Provider string `json:"provider"`
}

// Validate checks plan files offline, as the reconciler does before it
// plans: strict decoding, field rules and the rules of the strategy and
// control-plane provider. Each problem goes to ErrOut as file:line: field:
// message; the error counts them. The valid plans go to Out.
func Validate(_ context.Context, cfg ValidateConfig) error {
	if len(cfg.Paths) == 0 {
		return usageErrorf("name at least one plan file or directory")
	}
	if err := checkOutput(cfg.Output); err != nil {
		return err
	}
	files, err := loadPlans(cfg.Paths, cfg.ErrOut)
	if err != nil {
		return err
	}
	valid := make([]ValidPlan, 0, len(files))
	for _, f := range files {
		valid = append(valid, ValidPlan{Path: f.Path, Plan: f.Plan.Metadata.Name,
			Strategy: string(f.Plan.Spec.Strategy), Provider: string(f.Plan.Spec.Target.ControlPlane.Provider)})
	}
	return write(cfg.Out, cfg.Output, valid, func(w io.Writer) error {
		for _, v := range valid {
			if _, err := fmt.Fprintf(w, "%s: plan %s is valid (%s, %s)\n", v.Path, v.Plan, v.Strategy, v.Provider); err != nil {
				return err
			}
		}
		return nil
	})
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
