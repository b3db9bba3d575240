// Package events is ferry's step and result protocol on NATS JetStream: the
// FERRY_STEPS work queue that the reconciler publishes runnable steps to, and
// the FERRY_RESULTS stream that executors report outcomes on (see
// docs/architecture.md, "Events on the bus").
//
// An embedded nats-server with JetStream and a file store is the default
// transport; a URL points ferry at an external NATS cluster instead.
//
// It owns the protocol, and only that: the streams and their replicas
// (EnsureStreamsReplicas), the subjects, the versioned step and result
// events and their message IDs (StepID, so that a step published twice
// runs once), the worker that an executor's handler runs under (RunWorker:
// acks, in-progress signals, redelivery with back-off, a terminal error
// or the last delivery reported Failed), the results consumer and its
// replay when a reconciler starts or becomes the leader. Queue is what an
// executor replica needs of all that (executor.Run takes one):
// JetStreamQueue is it on NATS, MemoryQueue the same outcomes in one
// process, without a server.
//
// It must not import the planner, the observer, an executor, the status,
// the reconciler, Git, the forge, or the Kubernetes, OpenStack and Git
// clients (internal/layering's rule "the bus knows no backend"): it carries
// steps and results as data between the reconciler and the executors, and
// depends on neither side. What a step means is internal/step's.
package events
