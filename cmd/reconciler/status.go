package main

import (
	"context"
	"os"
	"time"

	"golang.org/x/term"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/app"
	"github.com/ferry-dev/ferry/internal/status/statusfile"
)

func newStatusCommand() *cobra.Command {
	var cfg app.StatusConfig
	cmd := &cobra.Command{
		Use:   "status [PLAN] --repo URL",
		Short: "Print each plan's phases, steps and errors from the status branch",
		Long: "Prints each plan's phase table (phase, state, steps done/left, current\n" +
			"step, attempts, last error, who approved) from status/<plan>.yaml at the\n" +
			"head of the status branch: all plans, or the one named. It changes\n" +
			"nothing. Exits 0 when no phase needs a person, 3 when a phase is Failed,\n" +
			"4 when one is Blocked (and none Failed), 1 when there is no status yet or\n" +
			"the repository cannot be read, 2 on a usage error.",
		Example: "  reconciler status --repo https://github.com/acme/migrations.git\n\n" +
			"  # Follow a plan until its approved phases end (exit 0, or 3 when one failed):\n" +
			"  reconciler status capi-quickstart --repo https://github.com/acme/migrations.git --watch\n\n" +
			"  # One plan, as YAML:\n" +
			"  reconciler status capi-quickstart --repo https://github.com/acme/migrations.git -o yaml",
		Args: cobra.MaximumNArgs(1),
	}
	fs := cmd.Flags()
	gitFlags(fs, &cfg.Git, false)
	outputFlag(cmd, &cfg.Output)
	fs.StringVar(&cfg.StatusBranch, "status-branch", statusfile.DefaultBranch, "branch the reconciler commits statuses to")
	fs.DurationVar(&cfg.Timeout, "timeout", 30*time.Second, "how long to wait for the repository")
	fs.BoolVarP(&cfg.Watch, "watch", "w", false, "follow until every approved phase has ended (a Blocked one is followed until ferry goes on) or one failed: redraw in a terminal, else one line per change; exit codes as without it")
	fs.DurationVar(&cfg.WatchInterval, "watch-interval", 5*time.Second, "how often --watch reads the status branch")
	cmd.RunE = runE(func(ctx context.Context, args []string) error {
		cfg.Streams = streams(cmd)
		if f, ok := cfg.Out.(*os.File); ok {
			cfg.Terminal = term.IsTerminal(int(f.Fd()))
		}
		if len(args) == 1 {
			cfg.Plan = args[0]
		}
		return app.Status(ctx, cfg)
	})
	return cmd
}
