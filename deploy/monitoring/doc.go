// Package monitoring holds the monitoring that comes with ferry: the
// PodMonitor that scrapes the reconciler's metrics, the alerting rules
// (prometheusrule.yaml) and the Grafana dashboard; and no Go code: doc.go
// is here for this comment.
//
// Its tests (package monitoring_test) check deploy/monitoring with
// Prometheus's own code, built by `make tools` (hack/tools/prometheus):
// promtool checks the alerting rules and runs their unit tests
// (testdata/rules_test.yaml), and promql-names parses every rule and
// dashboard query with Prometheus's PromQL parser and lists the metrics it
// selects, which must be ones the reconciler's metrics handler serves.
//
// The package imports nothing; its tests may use internal/testing.
package monitoring
