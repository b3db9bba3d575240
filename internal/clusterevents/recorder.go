package clusterevents

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/redact"
)

// queueLength bounds the batches waiting for their Cluster to be looked
// up; past it a batch is dropped (and logged): Events are a view of the
// status, which Git keeps, and must never hold the loop back.
const queueLength = 256

// spamBurst is how many Events client-go lets one source write on one
// object before it throttles to one per five minutes. Its default, 25, is
// for controllers that report every sync; ferry reports transitions only,
// so a plan's Events are bounded by its phases and steps, but a migration
// with a rollback and a few retried failures passes 25.
const spamBurst = 100

// Recorder writes Events on plans' Clusters. It uses client-go's
// tools/record (core/v1 Events) rather than tools/events
// (events.k8s.io/v1): `kubectl describe cluster` lists core/v1 Events
// with their count ("x2 over 5m"), which is how a repeated transition
// shows; CAPI's own controllers write core/v1 Events on the same Cluster,
// so ferry's interleave with theirs; and tools/record's correlator counts
// a repeated Event on the object it wrote first, where tools/events only
// starts a series after a second Event within six minutes. The
// correlator's memory ends with the process; the sink carries it over a
// restart (see sink).
type Recorder struct {
	clusters client.Reader
	recorder record.EventRecorder
	queue    chan batch
}

// batch is Events for one Cluster ("namespace/name").
type batch struct {
	cluster string
	events  []Event
}

// NewRecorder starts a Recorder that writes Events through cs, as
// Component, and looks Clusters up with clusters, until ctx ends (Events
// still queued then are dropped). Failures to write are logged with ctx's
// logger and never returned: Events are best effort.
func NewRecorder(ctx context.Context, cs kubernetes.Interface, clusters client.Reader) *Recorder {
	log := logging.From(ctx)
	// client-go logs its failures with klog; give it ferry's logger.
	kctx := klog.NewContext(ctx, logr.FromSlogHandler(log.Handler()))
	b := record.NewBroadcaster(record.WithContext(kctx), record.WithCorrelatorOptions(record.CorrelatorOptions{BurstSize: spamBurst}))
	b.StartRecordingToSink(&sink{ctx: ctx, events: cs.CoreV1()})
	r := &Recorder{
		clusters: clusters,
		recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: Component}),
		queue:    make(chan batch, queueLength),
	}
	go r.run(ctx)
	return r
}

// Record queues events for the Cluster "namespace/name"; it never
// blocks. A Cluster that does not exist gets none.
func (r *Recorder) Record(ctx context.Context, cluster string, events []Event) {
	if len(events) == 0 {
		return
	}
	select {
	case r.queue <- batch{cluster: cluster, events: events}:
	default:
		logging.From(ctx).Warn("cluster events dropped: too many waiting", "cluster", cluster, "events", len(events))
	}
}

// run writes the queued batches, in order, until ctx ends.
func (r *Recorder) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case b := <-r.queue:
			r.write(ctx, b)
		}
	}
}

// write hands a batch to client-go's recorder, which writes it in the
// background (and counts repeats).
func (r *Recorder) write(ctx context.Context, b batch) {
	log := logging.From(ctx).With("cluster", b.cluster)
	ref, err := clusterRef(ctx, r.clusters, b.cluster)
	switch {
	case apierrors.IsNotFound(err):
		// A plan may name a Cluster that is not there (yet, or any
		// more); its status says so, the Events have nowhere to go.
		log.Debug("no Cluster to write events on", "events", len(b.events))
		return
	case err != nil:
		log.Warn("cluster events not written: the Cluster could not be read", "events", len(b.events), "error", err)
		return
	}
	for _, ev := range b.events {
		// Transitions' messages are scrubbed already; an Event handed in
		// otherwise is scrubbed here, where it leaves the process.
		msg := redact.Scrub(ev.Message)
		log.Debug("cluster event", "type", ev.Type, "reason", ev.Reason, "message", msg)
		r.recorder.Event(ref, ev.Type, ev.Reason, msg)
	}
}

// clusterRef reads the Cluster's UID, which `kubectl describe` selects its
// Events by, and returns a reference to it. Only the metadata is read.
func clusterRef(ctx context.Context, c client.Reader, cluster string) (*corev1.ObjectReference, error) {
	ns, name, ok := strings.Cut(cluster, "/")
	if !ok {
		return nil, fmt.Errorf("cluster %q: want namespace/name", cluster)
	}
	gvk := clusterv1.GroupVersion.WithKind("Cluster")
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		return nil, fmt.Errorf("get Cluster %s: %w", cluster, err)
	}
	// No resourceVersion: client-go's correlator keys Events by the
	// reference, and a Cluster's version changes all the time.
	return &corev1.ObjectReference{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
		Namespace: ns, Name: name, UID: obj.GetUID()}, nil
}

// List returns the Events of the Cluster "namespace/name" as `kubectl
// describe cluster` finds them (by the Cluster's kind, name and UID; every
// source, CAPI's too), oldest first.
func List(ctx context.Context, c client.Reader, cluster string) ([]corev1.Event, error) {
	ref, err := clusterRef(ctx, c, cluster)
	if err != nil {
		return nil, err
	}
	var list corev1.EventList
	if err := c.List(ctx, &list, client.InNamespace(ref.Namespace), client.MatchingFields{
		"involvedObject.kind": ref.Kind, "involvedObject.name": ref.Name, "involvedObject.uid": string(ref.UID),
	}); err != nil {
		return nil, fmt.Errorf("list events of Cluster %s: %w", cluster, err)
	}
	slices.SortStableFunc(list.Items, func(a, b corev1.Event) int { return a.LastTimestamp.Compare(b.LastTimestamp.Time) })
	return list.Items, nil
}
