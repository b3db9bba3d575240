// Package planner turns a migration plan and a snapshot of observed state into
// the ordered groups of steps that are still to be done. It is pure: no I/O,
// no clock, no logger; the same input gives the same output, byte for byte.
// The step catalogue it implements is docs/steps.md, generated from it.
package planner
