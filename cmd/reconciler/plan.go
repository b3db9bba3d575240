package main

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/app"
)

func newPlanCommand() *cobra.Command {
	var cfg app.PlanConfig
	cmd := &cobra.Command{
		Use:   "plan FILE",
		Short: "Observe the live clusters and print the steps a plan would run (dry run)",
		Long: "Observes the live management cluster, the workload cluster through its\n" +
			"kubeconfig Secret and the OpenStack cloud through the plan's identity\n" +
			"Secret, and prints the steps that would run: the text the pull-request\n" +
			"preview shows. It changes nothing.",
		Example: "  reconciler plan plans/capi-quickstart.yaml --kubeconfig ~/.kube/mgmt\n\n" +
			"  # Check the manifests of a checkout, and print JSON:\n" +
			"  reconciler plan plans/capi-quickstart.yaml --repo-dir . -o json",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("name one plan file")
			}
			return nil
		},
	}
	fs := cmd.Flags()
	kube := kubeFlags(fs)
	outputFlag(cmd, &cfg.Output)
	repoDirFlag(fs, &cfg.RepoDir, "a checkout of the plans repository, where manifest paths are read to check whether they are applied (default: manifests are not checked and count as not applied)")
	fs.DurationVar(&cfg.Timeout, "timeout", 30*time.Second, "how long to wait for the clusters and the cloud to answer")
	fs.BoolVar(&cfg.NoCloud, "no-cloud", false, "do not ask OpenStack (names stay unresolved, servers unknown)")
	cmd.RunE = runE(func(ctx context.Context, args []string) error {
		cfg.Streams, cfg.Kube, cfg.File = streams(cmd), kube, args[0]
		return app.Plan(ctx, cfg)
	})
	return cmd
}
