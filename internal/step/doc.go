// Package step is the contract between the planner and the executors: a
// step as data (who runs it, what it does, to which object, with which
// parameters), and the one vocabulary both sides use for executor kinds,
// actions, target kinds and parameters. Nothing else defines them, so a
// kind the planner emits is one an executor knows by construction, and a
// parameter is written and read by one codec.
//
// The wire format (the JSON of a step, its parameter keys and value
// formatting, and String) is what events, status files and pull-request
// comments hold: changing it changes every golden file.
//
// It owns that vocabulary and a step's key (Key, ParseKey), by which the
// status, the results and the metrics name a step. It imports only the
// standard library and the other data packages (internal/layering's rule
// "the data packages hold data"): the planner, the bus, the status and
// the executors all import it, and a client imported here would reach the
// planner.
package step
