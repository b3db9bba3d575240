package main

import (
	"flag"
	"fmt"
	"io"
)

func validateCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: reconciler validate PATH...\n\n"+
			"Checks plan files offline, as the reconciler does before it plans: strict\n"+
			"decoding, field rules and the rules of the strategy and control-plane\n"+
			"provider. A directory stands for the .yaml and .yml files under it.\n"+
			"Exit status: 0 all valid, 1 a plan is invalid, 2 usage error.\n")
	}
	paths, err := parseInterspersed(fs, args)
	if err != nil {
		return 2
	}
	if len(paths) == 0 {
		fmt.Fprint(stderr, "reconciler validate: name at least one plan file or directory\n\n")
		fs.Usage()
		return 2
	}
	files, code := loadPlans("validate", paths, stderr)
	if code != 0 {
		return code
	}
	for _, f := range files {
		fmt.Fprintf(stdout, "%s: plan %s is valid (%s, %s)\n", f.Path, f.Plan.Metadata.Name, f.Plan.Spec.Strategy, f.Plan.Spec.Target.ControlPlane.Provider)
	}
	return 0
}
