package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/app"
	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/status"
)

func newRunCommand() *cobra.Command {
	var cfg app.RunConfig
	cmd := &cobra.Command{
		Use:   "run --repo URL",
		Short: "Reconcile the plans repository: plan, publish approved steps, run them, write status",
		Long: "Watches the plans repository, plans each plan against the live clusters and\n" +
			"cloud, publishes the steps of approved phases, runs them (in process by\n" +
			"default), and writes status to Git and to pull requests. It runs until\n" +
			"SIGINT or SIGTERM.",
		Example: "  # In a management cluster, as deploy/ runs it:\n" +
			"  reconciler run --repo https://github.com/acme/migrations.git --git-token-file /etc/ferry/git-token \\\n" +
			"    --github-repo acme/migrations --webhook-addr :9090 --webhook-secret-file /etc/ferry/webhook-secret \\\n" +
			"    --leader-elect\n\n" +
			"  # On a laptop, against a local checkout's repository:\n" +
			"  reconciler run --repo file://$PWD --kubeconfig ~/.kube/mgmt --no-cloud",
		Args: cobra.NoArgs,
	}
	kube := replicaFlags(cmd, &cfg.Git, &cfg.NATS, &cfg.Executors)
	fs := cmd.Flags()
	fs.StringVar(&cfg.Path, "path", gitsource.DefaultPath, "directory of plan files in the repository")
	fs.DurationVar(&cfg.Interval, "interval", 30*time.Second, "how often to poll the repository (a webhook polls at once)")
	fs.DurationVar(&cfg.Timeout, "timeout", 2*time.Minute, "bound on each stage of a cycle (a poll, the previews, one plan's observation and publication, a status write)")
	fs.DurationVar(&cfg.StallAfter, "stall-after", 0, "/healthz fails when the loop has not ended a pass, or one stage has run, for this long (0: 2×--interval + 2×--timeout + 1m)")
	fs.StringVar(&cfg.StatusBranch, "status-branch", status.DefaultBranch, "branch that receives status/<plan>.yaml commits (may be the tracked branch)")
	fs.StringVar(&cfg.DataDir, "data-dir", "ferry-data", "directory for the Git caches and the embedded NATS store")
	fs.StringVar(&cfg.WebhookAddr, "webhook-addr", "", "address for GitHub push and pull_request webhooks (e.g. :9090); empty: none")
	fs.StringVar(&cfg.WebhookSecretFile, "webhook-secret-file", "", "file holding the webhook's HMAC secret (required with --webhook-addr)")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", ":8080", "address of /metrics, /healthz and /readyz; empty: none")
	fs.BoolVar(&cfg.Pprof, "pprof", false, "serve Go's profiles under /debug/pprof/ on --metrics-addr")
	fs.BoolVar(&cfg.Leader.Elect, "leader-elect", false, "run only while holding a Lease in the management cluster")
	fs.StringVar(&cfg.Leader.Namespace, "leader-election-namespace", "ferry-system", "namespace of the leader election Lease")
	fs.StringVar(&cfg.Leader.Name, "leader-election-id", "ferry-reconciler", "name of the leader election Lease")
	fs.StringVar(&cfg.Leader.Identity, "leader-election-identity", "", "this replica's identity in the Lease (default: the host name)")
	fs.StringVar(&cfg.GitHub.Repo, "github-repo", "", "owner/name of the repository on GitHub, for PR comments and commit statuses; empty: none")
	fs.StringVar(&cfg.GitHub.APIURL, "github-api-url", "", "GitHub Enterprise base URL (empty: api.github.com)")
	fs.StringVar(&cfg.GitHub.TokenFile, "github-token-file", "", "file holding the GitHub token (default: $"+forge.TokenEnv+")")
	fs.DurationVar(&cfg.GitHub.CommentInterval, "comment-interval", 10*time.Second, "at most one edit per PR comment and commit status per interval")
	fs.BoolVar(&cfg.InProcess, "executors", true, "run the executors in this process (false: separate replicas, reconciler executor, take the steps)")
	fs.BoolVar(&cfg.NoCloud, "no-cloud", false, "do not observe OpenStack (steps that need it stay listed)")
	cmd.RunE = runE(func(ctx context.Context, _ []string) error {
		cfg.Streams, cfg.Kube = streams(cmd), kube
		return app.Run(ctx, cfg)
	})
	return cmd
}
