package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/ferry-dev/ferry/internal/app"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/gitsource"
)

// The kubeconfig flags load the management cluster's config for internal/app.
var _ app.RESTConfigGetter = (*genericclioptions.ConfigFlags)(nil)

// kubeFlags are client-go's --kubeconfig and --context, as kubectl has
// them: an explicit kubeconfig, else $KUBECONFIG, else ~/.kube/config, else
// in-cluster.
func kubeFlags(fs *pflag.FlagSet) *genericclioptions.ConfigFlags {
	kubeconfig, kubeContext := "", ""
	f := &genericclioptions.ConfigFlags{KubeConfig: &kubeconfig, Context: &kubeContext}
	f.AddFlags(fs)
	return f
}

// gitFlags registers the flags of the plans repository and how to reach
// it into g; withBranch adds --branch, for the commands that follow it.
func gitFlags(fs *pflag.FlagSet, g *app.Git, withBranch bool) {
	fs.StringVar(&g.URL, "repo", "", "URL of the plans repository (https://, ssh:// or file://)")
	if withBranch {
		fs.StringVar(&g.Branch, "branch", gitsource.DefaultBranch, "branch of the plans repository to follow: spec.approve on it approves phases")
	}
	fs.StringVar(&g.Auth.Username, "git-username", "", "user name sent with --git-token-file or over ssh (default: the URL's user, then git)")
	fs.StringVar(&g.Auth.TokenFile, "git-token-file", "", "file holding a token for https access to the repository")
	fs.StringVar(&g.Auth.SSHKeyFile, "ssh-key-file", "", "private key for ssh access to the repository")
	fs.StringVar(&g.Auth.KnownHostsFile, "ssh-known-hosts", "", "known_hosts file that ssh host keys are checked against")
	fs.BoolVar(&g.Auth.InsecureIgnoreHostKey, "ssh-insecure-ignore-host-key", false, "do not check ssh host keys (never in production)")
	fs.DurationVar(&g.Timeout, "git-timeout", gitsource.DefaultTimeout, "bound on each exchange with the Git remote (ls-remote, fetch, push); one that hangs fails and is retried")
	deprecatedAlias(fs, "token-file", "git-token-file", &g.Auth.TokenFile)
}

// natsFlags registers where the event bus is into n.
func natsFlags(fs *pflag.FlagSet, n *events.BusOptions) {
	fs.StringVar(&n.URL, "nats-url", "", "URL of an external NATS cluster with JetStream (nats://host:4222); run embeds a server under --data-dir without it")
	fs.StringVar(&n.CredsFile, "nats-creds", "", "NATS credentials file for --nats-url (a user's JWT and key, NATS's operator mode)")
	fs.StringVar(&n.User, "nats-user", "", "NATS user for --nats-url, with --nats-password-file: one per role, ferry-reconciler or ferry-executor (docs/install.md)")
	fs.StringVar(&n.PasswordFile, "nats-password-file", "", "file holding the password of --nats-user")
	fs.StringVar(&n.TLSCA, "nats-ca", "", "CA bundle that verifies the NATS servers (TLS; their URLs may say tls://)")
	fs.StringVar(&n.TLSCert, "nats-cert", "", "client certificate for NATS (with --nats-key)")
	fs.StringVar(&n.TLSKey, "nats-key", "", "client key for NATS (with --nats-cert)")
	fs.Var((*replicasValue)(&n.Replicas), "nats-replicas", "copies the NATS servers keep of the steps and results streams and their consumers: auto is 3 on a cluster of at least three JetStream servers, else 1; streams with fewer are scaled up in place")
}

// replicasValue is --nats-replicas: "auto" (events.AutoReplicas) or a
// number above zero. Zero and below are refused while parsing, so that
// they are usage errors naming the flag; they would otherwise mean auto,
// or nothing.
type replicasValue int

func (r *replicasValue) String() string {
	if *r == events.AutoReplicas {
		return "auto"
	}
	return strconv.Itoa(int(*r))
}

func (r *replicasValue) Set(s string) error {
	if s == "auto" {
		*r = events.AutoReplicas
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return fmt.Errorf("want a number from 1, or auto")
	}
	*r = replicasValue(n)
	return nil
}

func (r *replicasValue) Type() string { return "replicas" }

// executorFlags registers which executors run and how many steps at once.
func executorFlags(cmd *cobra.Command, e *app.Executors) {
	fs := cmd.Flags()
	fs.StringSliceVar(&e.Kinds, "kinds", slices.Clone(app.Kinds), "executor kinds to run, comma-separated")
	fs.IntVar(&e.Concurrency, "concurrency", 32, "steps of each kind run at once")
	fs.IntVar(&e.Waits, "waits", 64, "wait steps of each kind run at once, besides --concurrency")
	complete(cmd, "kinds", app.Kinds)
}

// replicaFlags registers the flags that run and executor share: the plans
// repository, the management cluster, the event bus and the executors.
func replicaFlags(cmd *cobra.Command, g *app.Git, n *events.BusOptions, e *app.Executors) *genericclioptions.ConfigFlags {
	gitFlags(cmd.Flags(), g, true)
	kube := kubeFlags(cmd.Flags())
	natsFlags(cmd.Flags(), n)
	executorFlags(cmd, e)
	return kube
}

// repoDirFlag registers --repo-dir, a checkout of the plans repository
// (once --repo-root in `plan`).
func repoDirFlag(fs *pflag.FlagSet, dir *string, usage string) {
	fs.StringVar(dir, "repo-dir", "", usage)
	deprecatedAlias(fs, "repo-root", "repo-dir", dir)
}

// outputFlag registers -o/--output for a command that prints data.
func outputFlag(cmd *cobra.Command, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", app.OutputText, "output format: "+strings.Join(app.Outputs, ", "))
	complete(cmd, "output", app.Outputs)
}

// complete offers values for a flag in shell completion.
func complete(cmd *cobra.Command, flag string, values []string) {
	_ = cmd.RegisterFlagCompletionFunc(flag, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
}

// deprecatedAlias registers old, an earlier name of the string flag
// current, hidden from help and warning on use; it goes in a later
// release.
func deprecatedAlias(fs *pflag.FlagSet, old, current string, p *string) {
	fs.StringVar(p, old, "", "")
	_ = fs.MarkDeprecated(old, "use --"+current+"; --"+old+" goes in a later release")
}

// rewriteSingleDash turns the single-dash long flags of the command that
// args name (-repo URL, -kubeconfig=K: Go's flag package took them, and
// earlier releases used it) into their --form, warning on stderr; they go
// in a later release. Shorthands (-o json, -h) are left as they are, and
// so is everything after "--".
func rewriteSingleDash(root *cobra.Command, args []string, stderr io.Writer) []string {
	c, _, err := root.Find(args)
	if err != nil {
		return args
	}
	c.InitDefaultHelpFlag()
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || strings.HasPrefix(a, "--") || len(name) < 2 {
			out = append(out, a)
			continue
		}
		f := c.Flags().Lookup(name)
		if f == nil {
			f = c.InheritedFlags().Lookup(name)
		}
		if f != nil {
			// A renamed flag gets pflag's warning, naming its new name.
			if f.Deprecated == "" {
				fmt.Fprintf(stderr, "Flag -%s has been deprecated, use --%s; single-dash long flags go in a later release\n", name, name)
			}
			a = "-" + a
		}
		out = append(out, a)
	}
	return out
}
