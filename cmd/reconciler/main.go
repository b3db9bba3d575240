// Command reconciler is ferry: it migrates Cluster API clusters onto
// OpenStack, one phase at a time, as approved by merges to a Git repository
// of migration plans. This package only parses the command line and wires
// the packages under internal/ together.
package main

import (
	"fmt"
	"io"
	"os"
)

// commands are the subcommands of reconciler.
var commands = []struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) int
}{
	{"executor", "run executors as a replica that takes steps from a shared NATS cluster", executorCommand},
	{"run", "reconcile the plans repository: plan, publish approved steps, run them, write status", runCommand},
	{"plan", "observe the live clusters and print the steps a plan would run (dry run)", planCommand},
	{"status", "print each plan's phases, steps and errors from the status branch", statusCommand},
	{"validate", "check plan files offline: strict decoding and every rule, with file:line", validateCommand},
	{"version", "print the version of ferry and of the libraries it was built with", versionCommand},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and returns the process exit code: 0 on
// success, 1 when the command failed, 2 on a usage error.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "reconciler: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprint(w, "Usage: reconciler <command> [flags]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nRun 'reconciler <command> -h' for a command's flags.\n")
}
