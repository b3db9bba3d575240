package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/app"
)

func newExecutorCommand() *cobra.Command {
	var cfg app.ExecutorConfig
	cmd := &cobra.Command{
		Use:   "executor --nats-url URL",
		Short: "Run executors as a replica that takes steps from a shared NATS cluster",
		Long: "Runs executors as a replica apart from the reconciler: it takes steps of\n" +
			"the given kinds from the shared NATS JetStream consumers, carries them out\n" +
			"and publishes their results. Replicas of one kind share its work.\n" +
			"It stops on SIGINT or SIGTERM, handing unfinished steps back.",
		Example: "  # A replica of every kind, reading manifests from the plans repository:\n" +
			"  reconciler executor --nats-url nats://nats:4222 --nats-creds /etc/ferry/nats.creds \\\n" +
			"    --repo https://github.com/acme/migrations.git --git-token-file /etc/ferry/git-token\n\n" +
			"  # Only OpenStack steps, eight at once:\n" +
			"  reconciler executor --nats-url nats://nats:4222 --kinds openstack --concurrency 8",
		Args: cobra.NoArgs,
	}
	kube := replicaFlags(cmd, &cfg.Git, &cfg.NATS, &cfg.Executors)
	fs := cmd.Flags()
	repoDirFlag(fs, &cfg.RepoDir, "a checkout of the plans repository, where manifest paths are read at every revision (instead of --repo)")
	fs.StringVar(&cfg.DataDir, "data-dir", "ferry-data", "directory for the Git cache of --repo")
	cmd.RunE = runE(func(ctx context.Context, _ []string) error {
		cfg.Streams, cfg.Kube = streams(cmd), kube
		return app.Executor(ctx, cfg)
	})
	return cmd
}
