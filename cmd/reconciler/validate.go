package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/app"
)

func newValidateCommand() *cobra.Command {
	var cfg app.ValidateConfig
	cmd := &cobra.Command{
		Use:   "validate PATH...",
		Short: "Check plan files offline: strict decoding and every rule, with file:line",
		Long: "Checks plan files offline, as the reconciler does before it plans: strict\n" +
			"decoding, field rules and the rules of the strategy and control-plane\n" +
			"provider. A directory stands for the .yaml and .yml files under it.\n" +
			"Problems go to stderr as file:line: field: message; with -o json or yaml,\n" +
			"stdout lists every file with its plan or its problems (line, field,\n" +
			"message), for a CI job to read.\n" +
			"Exit status: 0 all valid, 1 a plan is invalid, 2 usage error.",
		Example: "  reconciler validate plans/\n" +
			"  reconciler validate plans/capi-quickstart.yaml plans/kamaji-quickstart.yaml -o json",
	}
	outputFlag(cmd, &cfg.Output)
	cmd.RunE = runE(func(ctx context.Context, args []string) error {
		cfg.Streams, cfg.Paths = streams(cmd), args
		return app.Validate(ctx, cfg)
	})
	return cmd
}
