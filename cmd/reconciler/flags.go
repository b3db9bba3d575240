package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/ferry-dev/ferry/internal/planfile"
)

// parseInterspersed parses flags that come before, between or after the
// positional arguments (`plan FILE --kubeconfig K`), as users of kubectl
// expect; the flag package alone stops at the first positional argument.
// "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if len(args) > 0 && len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// loadPlans decodes the plan files named by paths. On failure it prints
// every problem (file:line: field: message) or the error to stderr and
// returns the exit code: 1 for invalid plans, 2 for unreadable paths.
func loadPlans(cmd string, paths []string, stderr io.Writer) ([]*planfile.File, int) {
	files, err := planfile.LoadPaths(paths)
	var problems planfile.Errors
	switch {
	case errors.As(err, &problems):
		for _, p := range problems {
			fmt.Fprintln(stderr, p)
		}
		fmt.Fprintf(stderr, "%d problem(s); %d plan(s) valid\n", len(problems), len(files))
		return files, 1
	case err != nil:
		fmt.Fprintf(stderr, "reconciler %s: %v\n", cmd, err)
		return nil, 2
	case len(files) == 0:
		fmt.Fprintf(stderr, "reconciler %s: no .yaml or .yml files in %v\n", cmd, paths)
		return nil, 1
	}
	return files, 0
}
