// Package v1alpha1 is the MigrationPlan file format, API version
// ferry.dev/v1alpha1: one YAML file per cluster under plans/, naming the CAPI
// cluster, the migration strategy, the target OpenStack cloud and the last
// phase that is approved to run.
//
// It owns the format: the types (their doc comments are the JSON Schema's
// descriptions, their `ferry` tags its rules: hack/schemagen writes
// migrationplan.schema.json from them), the defaults (Default), each
// strategy's phases in order, where a rollback stops, and the cloud names
// a plan asks to resolve. Decoding and validating a file is
// internal/planfile's.
//
// It imports only the standard library (internal/layering's rule "the
// leaves import only the standard library"): every layer imports it, the
// planner and the schema generator included.
package v1alpha1
