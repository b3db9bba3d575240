// Package v1alpha1 is the MigrationPlan file format, API version
// ferry.dev/v1alpha1: one YAML file per cluster under plans/, naming the CAPI
// cluster, the migration strategy, the target OpenStack cloud and the last
// phase that is approved to run.
package v1alpha1
