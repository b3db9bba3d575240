package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/ferry-dev/ferry/internal/planfile"
)

// ValidateConfig is the configuration of `reconciler validate`.
type ValidateConfig struct {
	Streams
	// Paths are plan files, or directories that stand for the .yaml and
	// .yml files under them.
	Paths []string
	// Output is text (a line per valid plan on Out, a line per problem
	// on ErrOut), json or yaml (a list of CheckedFile on Out, problems
	// included, and the problems on ErrOut as well).
	Output string
}

// CheckedFile is what validate found in one plan file: the plan when it
// is valid, its problems otherwise.
type CheckedFile struct {
	Path     string    `json:"path"`
	Plan     string    `json:"plan,omitempty"`
	Strategy string    `json:"strategy,omitempty"`
	Provider string    `json:"provider,omitempty"`
	Valid    bool      `json:"valid"`
	Problems []Problem `json:"problems,omitempty"`
}

// Problem is one planfile.Error, for a program to read.
type Problem struct {
	// Line is 0 when the problem is the file as a whole.
	Line int `json:"line,omitempty"`
	// Field is the field's path, like spec.target.workers[0].replicas;
	// empty for the document.
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// Validate checks plan files offline, as the reconciler does before it
// plans: strict decoding, field rules and the rules of the strategy and
// control-plane provider. Each problem goes to ErrOut as file:line: field:
// message; the error counts them. The valid plans go to Out, and with
// -o json|yaml every file with its problems, so that a CI job can read
// them.
func Validate(_ context.Context, cfg ValidateConfig) error {
	if len(cfg.Paths) == 0 {
		return usageErrorf("name at least one plan file or directory")
	}
	if err := checkOutput(cfg.Output); err != nil {
		return err
	}
	files, loadErr := planfile.LoadPaths(cfg.Paths)
	var problems planfile.Errors
	switch {
	case errors.As(loadErr, &problems):
	case loadErr != nil:
		return &UsageError{Err: loadErr}
	case len(files) == 0:
		return fmt.Errorf("no .yaml or .yml files in %v", cfg.Paths)
	}
	checked := checkedFiles(files, problems)
	for _, p := range problems {
		fmt.Fprintln(cfg.ErrOut, p)
	}
	err := write(cfg.Out, cfg.Output, checked, func(w io.Writer) error {
		for _, c := range checked {
			if !c.Valid {
				continue
			}
			if _, err := fmt.Fprintf(w, "%s: plan %s is valid (%s, %s)\n", c.Path, c.Plan, c.Strategy, c.Provider); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d problem(s); %d plan(s) valid", len(problems), len(files))
	}
	return nil
}

// checkedFiles lists the valid files and the files with problems, in
// path order.
func checkedFiles(valid []*planfile.File, problems planfile.Errors) []CheckedFile {
	byPath := map[string]*CheckedFile{}
	for _, f := range valid {
		byPath[f.Path] = &CheckedFile{Path: f.Path, Plan: f.Plan.Metadata.Name, Valid: true,
			Strategy: string(f.Plan.Spec.Strategy), Provider: f.Plan.Spec.Target.ControlPlane.Provider}
	}
	for _, p := range problems {
		c := byPath[p.File]
		if c == nil {
			c = &CheckedFile{Path: p.File}
			byPath[p.File] = c
		}
		c.Valid = false
		c.Problems = append(c.Problems, Problem{Line: p.Line, Field: p.Field, Message: p.Msg})
	}
	out := make([]CheckedFile, 0, len(byPath))
	for _, path := range slices.Sorted(maps.Keys(byPath)) {
		out = append(out, *byPath[path])
	}
	return out
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
