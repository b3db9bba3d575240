package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/ferry-dev/ferry/internal/app"
)

// version is set at link time by `make build` (-X main.version=...); a plain
// `go build` falls back to what the Go toolchain recorded.
var version string

// process is set by main: the command runs as the process, not in a test.
var process bool

func main() {
	process = true
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runContext(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the command line args until it ends, returning the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

// runContext runs the command line args until it ends or ctx does, and
// returns the process exit code: 0 on success, 1 when the command failed, 2
// on a usage error, or the code of an app.ExitError (`status`: a phase
// Failed or Blocked).
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCommand(stdout, stderr)
	root.SetArgs(rewriteSingleDash(root, args, stderr))
	c, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	if c == nil {
		c = root
	}
	var failed *commandError
	var exit *app.ExitError
	if errors.As(err, &exit) {
		fmt.Fprintf(stderr, "%s: %v\n", c.CommandPath(), err)
		return exit.Code
	}
	if errors.As(err, &failed) && !app.IsUsageError(err) {
		fmt.Fprintf(stderr, "%s: %v\n", c.CommandPath(), err)
		return 1
	}
	fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", c.CommandPath(), err, c.CommandPath())
	return 2
}

// newRootCommand is the command tree, writing to stdout and stderr.
func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "reconciler",
		Short: "ferry migrates Cluster API clusters onto OpenStack",
		Long: "ferry migrates Cluster API clusters onto OpenStack, one phase at a time, as\n" +
			"approved by merges to a Git repository of migration plans.",
		Example: "  reconciler validate plans/\n" +
			"  reconciler plan plans/capi-quickstart.yaml --kubeconfig ~/.kube/mgmt\n" +
			"  reconciler run --repo https://github.com/acme/migrations.git\n" +
			"  source <(reconciler completion bash)",
		SilenceErrors: true,
		SilenceUsage:  true,
		// Without a command: the help, as a usage error.
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(cmd.ErrOrStderr())
			_ = cmd.Help()
			return errors.New("name a command")
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().String("log-level", "info", "least level of the log lines written to stderr: debug, info, warn or error")
	root.PersistentFlags().String("log-format", app.LogText, "format of the log lines on stderr: text or json (one object per line)")
	root.AddCommand(newRunCommand(), newExecutorCommand(), newPlanCommand(), newStatusCommand(),
		newValidateCommand(), newVersionCommand())
	root.InitDefaultCompletionCmd()
	for _, c := range append(root.Commands(), root) {
		// Deprecation warnings go to stderr, never into printed data.
		c.Flags().SetOutput(stderr)
	}
	return root
}

// commandError is an error of a command's run, as opposed to cobra's
// errors about the command line: it exits 1 unless it is an
// app.UsageError.
type commandError struct{ err error }

func (e *commandError) Error() string { return e.err.Error() }
func (e *commandError) Unwrap() error { return e.err }

// runE adapts a command's function to cobra, marking its errors as the
// command's.
func runE(f func(ctx context.Context, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := checkPositive(cmd); err != nil {
			return err // a usage error: exit 2
		}
		format, _ := cmd.Flags().GetString("log-format")
		if _, err := app.ParseLog(logLevel(cmd), format); err != nil {
			return err
		}
		if err := f(cmd.Context(), args); err != nil {
			return &commandError{err: err}
		}
		return nil
	}
}

// positive are the flags whose value must be above zero: a zero or
// negative interval, timeout or concurrency would panic deep inside (a
// ticker), wait for nothing or run nothing.
var positive = []string{"interval", "timeout", "git-timeout", "comment-interval", "concurrency", "watch-interval"}

// checkPositive fails, naming the flag, when one of positive is not above
// zero on cmd.
func checkPositive(cmd *cobra.Command) error {
	for _, name := range positive {
		f := cmd.Flags().Lookup(name)
		if f == nil {
			continue
		}
		var bad bool
		switch f.Value.Type() {
		case "duration":
			d, err := cmd.Flags().GetDuration(name)
			bad = err != nil || d <= 0
		case "int":
			n, err := cmd.Flags().GetInt(name)
			bad = err != nil || n <= 0
		}
		if bad {
			return fmt.Errorf("--%s must be above zero, not %s", name, f.Value.String())
		}
	}
	return nil
}

// streams are where a command writes.
func streams(cmd *cobra.Command) app.Streams {
	format, _ := cmd.Flags().GetString("log-format")
	level, _ := app.ParseLog(logLevel(cmd), format) // checked in runE
	return app.Streams{Out: cmd.OutOrStdout(), ErrOut: cmd.ErrOrStderr(), LogLevel: level, LogFormat: format, Process: process}
}

func logLevel(cmd *cobra.Command) string {
	level, _ := cmd.Flags().GetString("log-level")
	return level
}
