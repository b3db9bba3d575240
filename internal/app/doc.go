// Package app holds what each command of the reconciler binary does, one
// function per command (Run, Executor, Plan, Status, Validate, Version),
// each taking a Config that cmd/reconciler fills from its flags. Keeping
// the commands here leaves cmd with parsing and wiring only, and lets the
// commands be tested without a command line.
//
// It owns building the process: the logger put in the context, the memory
// limit, the management cluster's clients and the observer's informers,
// the plans repository and the status branch, the forge behind its
// coalescer, the bus (embedded or external), the executors run in process
// or as `reconciler executor` replicas, the loop and its status recorder,
// leader election, and the webhook, metrics and health servers. The
// usage errors that make the binary exit 2 are its own (UsageError).
//
// It is the top of the graph: it may import every internal package but
// internal/testing (internal/layering's rule "test support stays out of
// the commands"), and no internal package may import it (rule "the
// commands sit on top"): below it a package is given what it needs as
// arguments and interfaces, it never reaches up for them.
package app
