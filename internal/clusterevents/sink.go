package clusterevents

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// sink is client-go's core/v1 event sink (the typed EventSinkImpl) with
// one difference: it names a new Event after what it says rather than
// after the moment, so that an Event a predecessor process wrote is found
// again, and a repeat is counted on it.
//
// client-go's correlator counts a repeated Event within a process only:
// its memory of what it wrote ends with the process, and it names each new
// Event "<object>.<nanoseconds>". A reconciler that restarts may report a
// transition again (its status was not yet committed when it stopped, or
// could not be read back), and a retried phase runs again after a restart:
// the Cluster would show the Event twice instead of "x2". Looking the
// predecessor up would need list on events; a name derived from the
// Event's identity needs nothing more than create and patch, which the
// recorder needs anyway.
type sink struct {
	ctx    context.Context
	events typedcorev1.EventsGetter
}

var _ record.EventSink = (*sink)(nil)

// Create writes a new Event, or counts it on the one a predecessor wrote.
func (s *sink) Create(ev *corev1.Event) (*corev1.Event, error) {
	named := *ev
	named.Name = stableName(ev)
	events := s.events.Events(ev.Namespace)
	created, err := events.Create(s.ctx, &named, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return created, err
	}
	// A patch answers with the Event, and patch is what the recorder may
	// do: the first one moves lastTimestamp and reads the count, the
	// second raises it, unless the Event changed in between (the
	// resourceVersion is a precondition; client-go drops an Event the
	// server refuses, and a lost count is all that is lost).
	stamp, err := json.Marshal(map[string]any{"lastTimestamp": ev.LastTimestamp})
	if err != nil {
		return nil, fmt.Errorf("event patch: %w", err)
	}
	prev, err := events.Patch(s.ctx, named.Name, types.MergePatchType, stamp, metav1.PatchOptions{})
	if err != nil {
		return nil, err
	}
	count, err := json.Marshal(map[string]any{"count": max(prev.Count, 1) + 1,
		"metadata": map[string]any{"resourceVersion": prev.ResourceVersion}})
	if err != nil {
		return nil, fmt.Errorf("event patch: %w", err)
	}
	return events.Patch(s.ctx, named.Name, types.MergePatchType, count, metav1.PatchOptions{})
}

// Update replaces an Event (client-go's recorder does not call it today).
func (s *sink) Update(ev *corev1.Event) (*corev1.Event, error) {
	return s.events.Events(ev.Namespace).Update(s.ctx, ev, metav1.UpdateOptions{})
}

// Patch applies client-go's strategic merge patch of a repeated Event.
func (s *sink) Patch(ev *corev1.Event, data []byte) (*corev1.Event, error) {
	return s.events.Events(ev.Namespace).Patch(s.ctx, ev.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
}

// stableName is "<object>.<hash>" of what client-go's correlator tells
// Events apart by (source, object, type, reason, message): two Events it
// would count as one get the same name. The object's UID is in it, so a
// Cluster created again under the same name starts afresh.
func stableName(ev *corev1.Event) string {
	o := ev.InvolvedObject
	h := sha256.Sum256([]byte(strings.Join([]string{ev.Source.Component, ev.Source.Host,
		o.Kind, o.Namespace, o.Name, o.FieldPath, string(o.UID), o.APIVersion, ev.Type, ev.Reason, ev.Message}, "\x00")))
	return o.Name + "." + hex.EncodeToString(h[:8])
}
