// Command reconciler is ferry: it migrates Cluster API clusters onto
// OpenStack, one phase at a time, as approved by merges to a Git repository
// of migration plans. This package only parses the command line (cobra and
// pflag) and calls one function of internal/app per command.
//
// It owns the command line: the commands, their flags and defaults (some
// taken from the packages that own them, such as the Git branch, the bus's
// options and the status branch), the help that docs/commands.md is
// checked against, and the exit codes (0, 1, 2 for a usage error). Its
// tests run the binary's commands against real backends, end to end.
//
// It imports internal/app, and the packages whose flag types and defaults
// it names, but never internal/reconciler, the planner, the observer, an
// executor or the Kubernetes-object and OpenStack clients directly
// (internal/layering's rule "cmd only wires"): what a command does lives in
// internal/app. It never imports internal/testing (rule "test support
// stays out of the commands"); its tests may.
package main
