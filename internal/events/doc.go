// Package events is ferry's step and result protocol on NATS JetStream: the
// FERRY_STEPS work queue that the reconciler publishes runnable steps to, and
// the FERRY_RESULTS stream that executors report outcomes on (see
// docs/architecture.md, "Events on the bus").
//
// An embedded nats-server with JetStream and a file store is the default
// transport; a URL points ferry at an external NATS cluster instead.
package events
