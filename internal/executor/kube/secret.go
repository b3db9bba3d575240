package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/executor"
	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/redact"
	"github.com/ferry-dev/ferry/internal/step"
)

// copySecret copies keys of a source Secret into the target Secret. The
// target is created when absent; an existing one only gets the keys it
// lacks, and a key it has is never overwritten: these are CAs, keys and
// credentials the running cluster depends on, and ferry never replaces
// them. A value copied as clouds.yaml or cacert must be one (checkCopies)
// before anything is written. Values stay out of logs, errors and
// reports: only key names appear, and a refused write's error is
// scrubbed of them (scrubWrite).
func (e *Executor) copySecret(ctx context.Context, s *job) (events.Report, error) {
	fromNS, fromName, err := s.params().NamespacedName(step.ParamFrom)
	if err != nil {
		return events.Report{}, fmt.Errorf("copy to %s: %w", s.target(), err)
	}
	from := "Secret " + fromNS + "/" + fromName
	keys, err := s.params().KeyCopies()
	if err != nil {
		return events.Report{}, s.paramError(err)
	}
	labels, err := s.params().Map(step.ParamLabel)
	if err != nil {
		return events.Report{}, s.paramError(err)
	}
	src, keys, err := e.readSource(ctx, s, client.ObjectKey{Namespace: fromNS, Name: fromName}, keys)
	if err != nil {
		return events.Report{}, err
	}

	var dst corev1.Secret
	err = e.Client.Get(ctx, s.key, &dst)
	switch {
	case apierrors.IsNotFound(err):
		if err := checkCopies(s, from, src.Data, keys); err != nil {
			return events.Report{}, err
		}
		return e.createSecretCopy(ctx, s, src, from, keys, labels)
	case err != nil:
		return events.Report{}, fmt.Errorf("copy %s to %s: read target: %w", from, s.target(), err)
	}
	var missing []step.KeyCopy
	for _, k := range keys {
		if _, ok := dst.Data[k.Dst]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return events.Report{Message: fmt.Sprintf("%s already has %s; left as it is", s.target(), keyNames(keys))}, nil
	}
	if err := checkCopies(s, from, src.Data, missing); err != nil {
		return events.Report{}, err
	}
	before := dst.DeepCopy()
	if dst.Data == nil {
		dst.Data = map[string][]byte{}
	}
	for _, k := range missing {
		dst.Data[k.Dst] = src.Data[k.Src]
	}
	s.log.Info("adding keys to Secret", "object", s.target(), "from", from, "keys", keyNames(missing))
	patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
	if err := e.Client.Patch(ctx, &dst, patch, client.FieldOwner(executor.FieldManager)); err != nil {
		return events.Report{}, executor.WriteError(fmt.Sprintf("copy %s to %s: add %s", from, s.target(), keyNames(missing)), scrubWrite(err, dst.Data))
	}
	return events.Report{Message: fmt.Sprintf("copied %s from %s into existing %s; its other keys left as they are",
		keyNames(missing), from, s.target())}, nil
}

// readSource reads the Secret a copy-secret step copies from and checks
// that it has the keys to copy; no keys named means all of its keys. A
// missing source or key is terminal: a person restores it or corrects
// the plan.
func (e *Executor) readSource(ctx context.Context, s *job, key client.ObjectKey, keys []step.KeyCopy) (*corev1.Secret, []step.KeyCopy, error) {
	from := "Secret " + key.String()
	var src corev1.Secret
	err := e.Client.Get(ctx, key, &src)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil, failure.Terminal(fmt.Errorf("copy %s to %s: source not found; restore it or correct the plan", from, s.target()))
	case err != nil:
		return nil, nil, fmt.Errorf("copy %s to %s: read source: %w", from, s.target(), err)
	}
	if keys == nil {
		for k := range src.Data {
			keys = append(keys, step.KeyCopy{Dst: k, Src: k})
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i].Dst < keys[j].Dst })
		if len(keys) == 0 {
			return nil, nil, failure.Terminal(fmt.Errorf("copy %s to %s: the source has no keys", from, s.target()))
		}
	}
	for _, k := range keys {
		if _, ok := src.Data[k.Src]; !ok {
			return nil, nil, failure.Terminal(fmt.Errorf("copy %s to %s: the source has no key %q", from, s.target(), k.Src))
		}
	}
	return &src, keys, nil
}

func (e *Executor) createSecretCopy(ctx context.Context, s *job, src *corev1.Secret, from string, keys []step.KeyCopy, labels map[string]string) (events.Report, error) {
	// Opaque, whatever the source's type: Cluster API's
	// KubeadmControlPlane makes itself the controller of every Secret of
	// type cluster.x-k8s.io/secret it reads, so that deleting it would
	// garbage-collect the cluster's CA with it.
	sec := &corev1.Secret{Data: map[string][]byte{}, Type: corev1.SecretTypeOpaque}
	meta(sec, s, false)
	for k, v := range labels {
		sec.Labels[k] = v
	}
	for _, k := range keys {
		sec.Data[k.Dst] = src.Data[k.Src]
	}
	s.log.Info("creating Secret", "object", s.target(), "from", from, "keys", keyNames(keys))
	err := e.Client.Create(ctx, sec, client.FieldOwner(executor.FieldManager))
	if apierrors.IsAlreadyExists(err) {
		// Created meanwhile: the next attempt adds only what it lacks.
		return events.Report{}, fmt.Errorf("copy %s to %s: created by someone else meanwhile; the next attempt checks its keys", from, s.target())
	}
	if err != nil {
		return events.Report{}, executor.WriteError(fmt.Sprintf("copy %s to %s", from, s.target()), scrubWrite(err, sec.Data))
	}
	return events.Report{Message: fmt.Sprintf("copied %s from %s to new %s", keyNames(keys), from, s.target())}, nil
}

// scrubWrite masks in err, the refusal of a write of a Secret with data,
// the data's values (redact.Error): an admission webhook or policy that
// refuses the write may quote the object it was sent, the values in
// base64 as the object carries them, and nothing else in this process
// may know them as secret yet (a kube executor replica never reads the
// cloud's credentials to connect, which registers them).
func scrubWrite(err error, data map[string][]byte) error {
	values := make([]string, 0, len(data))
	for _, v := range data {
		values = append(values, string(v))
	}
	return redact.Error(err, values...)
}

// keyNames lists the target key names: "keys a, b".
func keyNames(keys []step.KeyCopy) string {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.Dst
	}
	if len(names) == 1 {
		return "key " + names[0]
	}
	return "keys " + strings.Join(names, ", ")
}

// labelSecret gives an existing Secret of the cluster CAPI's cluster-name
// label: Cluster API's managers cache only the Secrets that carry it, and
// a kubeconfig Secret they cannot see is one KubeadmControlPlane tries to
// create again, failing on every pass. Only the label is changed.
func (e *Executor) labelSecret(ctx context.Context, s *job) (events.Report, error) {
	var sec corev1.Secret
	if err := e.get(ctx, s, &sec); err != nil {
		return events.Report{}, err
	}
	want := s.cluster()
	if sec.Labels[clusterv1.ClusterNameLabel] == want {
		return events.Report{Message: fmt.Sprintf("%s already has label %s=%s", s.target(), clusterv1.ClusterNameLabel, want)}, nil
	}
	before := sec.DeepCopy()
	if sec.Labels == nil {
		sec.Labels = map[string]string{}
	}
	sec.Labels[clusterv1.ClusterNameLabel] = want
	if sec.Annotations == nil {
		sec.Annotations = map[string]string{}
	}
	// A rollback takes the label off again.
	sec.Annotations[observed.AnnotationLabelledBy] = s.ev.Plan
	s.log.Info("labelling Secret", "object", s.target(), "label", clusterv1.ClusterNameLabel+"="+want)
	if err := e.Client.Patch(ctx, &sec, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}), client.FieldOwner(executor.FieldManager)); err != nil {
		return events.Report{}, executor.WriteError("label "+s.target(), err)
	}
	return events.Report{Message: fmt.Sprintf("labelled %s %s=%s", s.target(), clusterv1.ClusterNameLabel, want)}, nil
}
