// Command bench is `make bench`'s fleet benchmark: it migrates N seed 000
// clusters at once with `reconciler run`, then the same phases the way
// seed 000 does them by hand with kubectl, and reports what each cost.
//
// It starts a management API server and one API server that stands for
// every workload cluster (through a proxy that shows each cluster its own
// Nodes), a stand-in for the OpenStack APIs, a Git server with one adopt
// plan per cluster, the GitHub stand-in and the CAPI/CAPO controller
// stand-ins of the demo, and builds and runs bin/reconciler (executors in process,
// embedded NATS) as a separate process. One merged pull request approves
// every plan's last phase; the benchmark measures until every phase of
// every plan succeeded, then measures a minute of idleness.
//
// With --layout cluster it then migrates the same fleet again in a fresh
// world, with ferry as a production install runs it: a three-node NATS
// JetStream cluster in the benchmark's process, R3 streams, `reconciler
// run --executors=false` and three `reconciler executor` processes; the
// table gives both runs side by side and what the cluster layout costs
// per step.
//
// After the runs of ferry it runs the kubectl baseline on the single
// run's servers, its reconciler stopped: a second fleet (namespace
// baseline), each cluster the twin of one of ferry's, adopted by a bash
// script per cluster that does seed 000's phases with one process of
// Debian's kubectl per change and a loop that polls every second between
// phases, --baseline-parallel scripts at once. The scripts' manifests are
// the objects ferry created for the twins, and afterwards each baseline
// cluster must look like its twin, or the benchmark fails. It prints a
// table, with ferry's time over the baseline's, and writes the figures
// of every run as JSON.
//
// It is a tool of this repository, not part of what ferry ships: it may
// import internal/testing (the stand-ins, the test backends), and nothing
// imports it. It runs bin/reconciler as a separate process and reads the
// statuses from the status branch, as an operator would; with
// --container-memory, memlimit.Of gives each of ferry's processes the
// GOMEMLIMIT of a container that size.
package main
