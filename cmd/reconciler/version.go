package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/app"
)

func newVersionCommand() *cobra.Command {
	var cfg app.VersionConfig
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of ferry and of the libraries it was built with",
		Example: "  reconciler version\n" +
			"  reconciler version -o json",
		Args: cobra.NoArgs,
	}
	outputFlag(cmd, &cfg.Output)
	cmd.RunE = runE(func(ctx context.Context, _ []string) error {
		cfg.Streams, cfg.Linked = streams(cmd), version
		return app.Version(ctx, cfg)
	})
	return cmd
}
