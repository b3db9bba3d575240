// Package step is the contract between the planner and the executors: a
// step as data (who runs it, what it does, to which object, with which
// parameters, and with which inputs), and the one vocabulary both sides
// use for executor kinds, actions, target kinds and parameters. Nothing
// else defines them, so a kind the planner emits is one an executor knows
// by construction, and a parameter is written and read by one codec.
//
// A step's parameters are what people read of it; its Inputs are what its
// executor needs of the plan besides them (the cluster, a whole public
// key, tolerations whole), which people need not read. The planner
// resolves both from the plan, and an executor reads only the step and
// its inputs, never the plan.
//
// The wire format (the JSON of a step, its parameter keys and value
// formatting, and String) is what events, status files and pull-request
// comments hold: changing it changes every golden file. Inputs are not
// part of it: the step event carries them beside the step.
//
// It owns that vocabulary and a step's key (Key, ParseKey), by which the
// status, the results and the metrics name a step. It imports only the
// standard library and the other data packages (internal/layering's rule
// "the data packages hold data"): the planner, the bus, the status and
// the executors all import it, and a client imported here would reach the
// planner.
package step
