// Package logging carries the logger in the context, as docs/development.md
// ("How the code is written") asks: a caller attaches what a line concerns (plan, phase, step, revision) once,
// with With, and everything it calls logs with it through From, instead of
// holding a logger in a field of its own.
//
// It owns the context key and the handler wrapper that keeps secrets out
// of every line (Redacting, through internal/redact's Scrub), and nothing
// else: the handler, the level and the format are chosen where the
// process is built (internal/app), and that handler is the one to wrap in
// Redacting.
// The planner never logs (it takes no context); what it decided is logged
// by the reconciler that called it.
//
// It imports only the standard library and internal/redact
// (internal/layering's rule "the leaves import only the standard
// library"): the bus, the executors and the clients all import it.
package logging
