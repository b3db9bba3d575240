// Package failure sorts errors by what should happen next. A terminal error
// needs a person to change something (a wrong password, a name that does
// not exist, an invalid plan): retrying cannot help, so it is reported and
// not retried. Any other error is retryable: a timeout, a refused
// connection, a conflict, which the next attempt may not meet.
//
// It owns that one distinction for the whole module (Terminal,
// IsTerminal): the executors and the clients of Git, the forge and
// OpenStack mark what retrying cannot fix, step parameters that do not
// decode are terminal, and the bus's worker ends a step that failed
// terminally instead of delivering it again.
//
// It imports only the standard library: every layer imports it, the
// planner's data packages too (internal/layering's rules "the leaves import
// only the standard library" and "the data packages hold data").
package failure
