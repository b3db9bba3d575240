package main

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/app"
	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/status/statusfile"
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
			"    --forge-repo acme/migrations --forge-token-file /etc/ferry/forge-token \\\n" +
			"    --webhook-addr :9090 --webhook-secret-file /etc/ferry/webhook-secret --leader-elect\n\n" +
			"  # With the plans repository on a Gitea (or Forgejo) server:\n" +
			"  reconciler run --repo https://gitea.example.com/acme/migrations.git --git-token-file /etc/ferry/git-token \\\n" +
			"    --forge gitea --forge-url https://gitea.example.com --forge-repo acme/migrations \\\n" +
			"    --forge-token-file /etc/ferry/git-token --webhook-addr :9090 --webhook-secret-file /etc/ferry/webhook-secret\n\n" +
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
	fs.StringVar(&cfg.StatusBranch, "status-branch", statusfile.DefaultBranch, "branch that receives status/<plan>.yaml commits (may be the tracked branch)")
	fs.StringVar(&cfg.DataDir, "data-dir", "ferry-data", "directory for the Git caches and the embedded NATS store")
	fs.StringVar(&cfg.WebhookAddr, "webhook-addr", "", "address for the forge's push, pull_request and issue_comment webhooks, signed as --forge signs them (e.g. :9090); empty: none")
	fs.StringVar(&cfg.WebhookSecretFile, "webhook-secret-file", "", "file holding the webhook's HMAC secret (required with --webhook-addr)")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", localMetricsAddr, "address of /metrics, /healthz and /readyz; empty: none; in a pod ($"+inClusterEnv+" set) the default is "+clusterMetricsAddr)
	fs.BoolVar(&cfg.Pprof, "pprof", false, "serve Go's profiles under /debug/pprof/ on --metrics-addr")
	fs.BoolVar(&cfg.Leader.Elect, "leader-elect", false, "run only while holding a Lease in the management cluster")
	fs.StringVar(&cfg.Leader.Namespace, "leader-election-namespace", "ferry-system", "namespace of the leader election Lease")
	fs.StringVar(&cfg.Leader.Name, "leader-election-id", "ferry-reconciler", "name of the leader election Lease")
	fs.StringVar(&cfg.Leader.Identity, "leader-election-identity", "", "this replica's identity in the Lease (default: the host name)")
	fs.StringVar(&cfg.Forge.Kind, "forge", app.ForgeGitHub, "forge that hosts the repository, for PR comments, commit statuses and webhooks: "+strings.Join(app.Forges, " or "))
	fs.StringVar(&cfg.Forge.Repo, "forge-repo", "", "owner/name of the repository on the forge, for PR comments and commit statuses; empty: none")
	fs.StringVar(&cfg.Forge.URL, "forge-url", "", "the forge's base URL: a GitHub Enterprise server's (empty: api.github.com) or the Gitea server's (required with --forge gitea)")
	fs.StringVar(&cfg.Forge.TokenFile, "forge-token-file", "", "file holding the forge's API token (default: $"+forge.TokenEnv+", or $"+forge.GiteaTokenEnv+" with --forge gitea)")
	deprecatedAlias(fs, "github-repo", "forge-repo", &cfg.Forge.Repo)
	deprecatedAlias(fs, "github-api-url", "forge-url", &cfg.Forge.URL)
	deprecatedAlias(fs, "github-token-file", "forge-token-file", &cfg.Forge.TokenFile)
	complete(cmd, "forge", app.Forges)
	fs.DurationVar(&cfg.Forge.CommentInterval, "comment-interval", 10*time.Second, "at most one edit per PR comment and commit status per interval")
	fs.StringVar(&cfg.Forge.RequiredReviews, "required-reviews", "", "review policy: phase=count pairs (cleanup=2,cutover=2): approving reviews of the merged pull request's last commit, by accounts with write access other than its author, that a phase's approval needs (docs/security.md)")
	fs.StringVar(&cfg.Forge.OwnersFile, "owners-file", "", "owners by path, like CODEOWNERS: lines 'pattern login...' (plans/prod-*.yaml alice carol), the last match winning; a plan's approval then needs an approving review by one of its file's owners; a local file, such as a mounted ConfigMap, read at start (docs/security.md)")
	fs.BoolVar(&cfg.Forge.AllowPushApprovals, "allow-push-approvals", false, "with a forge, also act on approvals pushed without a pull request (their approver is the commit's author, which anyone can write)")
	fs.BoolVar(&cfg.InProcess, "executors", true, "run the executors in this process (false: separate replicas, reconciler executor, take the steps)")
	fs.BoolVar(&cfg.NoCloud, "no-cloud", false, "do not observe OpenStack (steps that need it stay listed)")
	cmd.RunE = runE(func(ctx context.Context, _ []string) error {
		cfg.Streams, cfg.Kube = streams(cmd), kube
		if !fs.Changed("metrics-addr") {
			cfg.MetricsAddr = defaultMetricsAddr(os.Getenv)
		}
		return app.Run(ctx, cfg)
	})
	return cmd
}

// The defaults of --metrics-addr: loopback outside a cluster, so that a
// reconciler on a laptop or a shared machine shows its metrics, health
// and (with --pprof) profiles to no other machine; every address in a pod,
// where Prometheus scrapes it and the kubelet probes it (deploy/ passes
// it explicitly all the same).
const (
	localMetricsAddr   = "127.0.0.1:8080"
	clusterMetricsAddr = ":8080"
	// inClusterEnv is set by the kubelet in every container of a pod.
	inClusterEnv = "KUBERNETES_SERVICE_HOST"
)

// defaultMetricsAddr is --metrics-addr when it is not given.
func defaultMetricsAddr(getenv func(string) string) string {
	if getenv(inClusterEnv) != "" {
		return clusterMetricsAddr
	}
	return localMetricsAddr
}
