package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/bootstrap/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/executor"
	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
)

// A rollback removes what ferry created without any controller acting on
// the removal, as clusterctl move deletes a moved cluster's source
// objects: the Cluster is paused first (a step of its own), then each
// object is paused and stripped of its finalizers in one write, and
// deleted only if nothing wrote it since (a precondition on its resource
// version). A controller that adds its finalizer back in between makes
// the delete fail, and the next attempt starts again; once an object has
// no finalizer its deletion is immediate, so no controller is ever asked
// to delete a server, a port or a network for it.

// gvkOf is the group, version and kind of a step's target kind.
func gvkOf(kind string) (schema.GroupVersionKind, bool) {
	if kind == step.Secret {
		return corev1.SchemeGroupVersion.WithKind(kind), true
	}
	gv, ok := groupVersions[kind]
	return gv.WithKind(kind), ok
}

// remove deletes an object ferry created for the plan (LabelCreatedBy),
// paused and without its finalizers. One ferry did not create is never
// removed: terminal, for a person.
func (e *Executor) remove(ctx context.Context, s *job) (events.Report, error) {
	gvk, ok := gvkOf(s.kind())
	if !ok {
		return events.Report{}, failure.Terminal(fmt.Errorf("remove %s: not a kind ferry creates", s.target()))
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	err := e.Client.Get(ctx, s.key, obj)
	switch {
	case apierrors.IsNotFound(err):
		return events.Report{Message: s.target() + " is gone already"}, nil
	case err != nil:
		return events.Report{}, fmt.Errorf("remove %s: %w", s.target(), err)
	}
	if by := obj.Labels[observed.LabelCreatedBy]; by != s.ev.Plan {
		return events.Report{}, failure.Terminal(fmt.Errorf("remove %s: it was not created by ferry for plan %s (label %s=%q); a rollback leaves it", s.target(), s.ev.Plan, observed.LabelCreatedBy, by))
	}
	if s.kind() == step.KubeadmConfig {
		if err := e.removeBootstrapData(ctx, s); err != nil {
			return events.Report{}, err
		}
	}
	finalizers := obj.Finalizers
	if len(finalizers) > 0 || !isPaused(obj) {
		before := obj.DeepCopy()
		obj.Finalizers = nil
		if s.kind() != step.Secret {
			ann := obj.GetAnnotations()
			if ann == nil {
				ann = map[string]string{}
			}
			ann[clusterv1.PausedAnnotation] = "true"
			ann[observed.AnnotationPausedBy] = s.ev.Plan
			obj.SetAnnotations(ann)
		}
		s.log.Info("pausing and taking the finalizers off before removal", "object", s.target(), "finalizers", strings.Join(finalizers, ","))
		patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
		if err := e.Client.Patch(ctx, obj, patch, client.FieldOwner(executor.FieldManager)); err != nil {
			if apierrors.IsNotFound(err) {
				return events.Report{Message: s.target() + " is gone already"}, nil
			}
			return events.Report{}, executor.WriteError("remove "+s.target()+": take its finalizers off", err)
		}
	}
	s.log.Info("removing", "object", s.target())
	err = e.Client.Delete(ctx, obj, client.Preconditions{UID: &obj.UID, ResourceVersion: &obj.ResourceVersion})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return events.Report{}, executor.WriteError("remove "+s.target(), err)
	}
	msg := "removed " + s.target()
	if len(finalizers) > 0 {
		msg += " (its finalizers " + strings.Join(finalizers, ", ") + " taken off first)"
	}
	return events.Report{Message: msg}, nil
}

// isPaused reports whether an object carries CAPI's pause annotation
// (a Secret has no pause, and counts as paused).
func isPaused(obj *metav1.PartialObjectMetadata) bool {
	if obj.Kind == step.Secret {
		return true
	}
	_, ok := obj.Annotations[clusterv1.PausedAnnotation]
	return ok
}

// removeBootstrapData deletes the bootstrap data Secret the kubeadm
// bootstrap provider wrote for a KubeadmConfig, which it controls: with
// the KubeadmConfig gone, nothing else would.
func (e *Executor) removeBootstrapData(ctx context.Context, s *job) error {
	var kc bootstrapv1.KubeadmConfig
	if err := e.Client.Get(ctx, s.key, &kc); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("remove %s: %w", s.target(), err))
	}
	if kc.Status.DataSecretName == nil {
		return nil
	}
	key := client.ObjectKey{Namespace: kc.Namespace, Name: *kc.Status.DataSecretName}
	var sec corev1.Secret
	err := e.Client.Get(ctx, key, &sec)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("remove %s: read its bootstrap data Secret %s: %w", s.target(), key, err)
	}
	if ref := metav1.GetControllerOf(&sec); ref == nil || ref.UID != kc.UID {
		return nil // not the KubeadmConfig's own: it stays
	}
	s.log.Info("removing the bootstrap data Secret", "object", s.target(), "secret", key.String())
	err = e.Client.Delete(ctx, &sec, client.Preconditions{UID: &sec.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		return executor.WriteError(fmt.Sprintf("remove %s: delete its bootstrap data Secret %s", s.target(), key), err)
	}
	return nil
}

// release undoes what ferry's phases did to an object that was there
// before (a Secret, a KamajiControlPlane): the owner references to
// objects ferry created (or to such objects already gone), which would
// have the garbage collector delete it with them, and the cluster-name
// label ferry gave it. Nothing else of it is touched: a Secret keeps its
// data byte for byte.
func (e *Executor) release(ctx context.Context, s *job) (events.Report, error) {
	gvk, _ := gvkOf(s.kind())
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	if err := e.Client.Get(ctx, s.key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return events.Report{Message: s.target() + " is gone"}, nil
		}
		return events.Report{}, fmt.Errorf("release %s: %w", s.target(), err)
	}
	if obj.Labels[observed.LabelCreatedBy] == s.ev.Plan {
		return events.Report{}, failure.Terminal(fmt.Errorf("release %s: ferry created it; a rollback removes it instead", s.target()))
	}
	before := obj.DeepCopy()
	var keep []metav1.OwnerReference
	var dropped []string
	for _, ref := range obj.OwnerReferences {
		ours, err := e.createdByPlan(ctx, s, obj.Namespace, ref)
		if err != nil {
			return events.Report{}, err
		}
		if ours {
			dropped = append(dropped, ref.Kind+"/"+ref.Name)
			continue
		}
		keep = append(keep, ref)
	}
	obj.OwnerReferences = keep
	unlabelled := false
	if obj.Annotations[observed.AnnotationLabelledBy] == s.ev.Plan {
		delete(obj.Labels, clusterv1.ClusterNameLabel)
		delete(obj.Annotations, observed.AnnotationLabelledBy)
		unlabelled = true
	}
	if len(dropped) == 0 && !unlabelled {
		return events.Report{Message: s.target() + " has nothing of ferry's"}, nil
	}
	s.log.Info("releasing", "object", s.target(), "owners", strings.Join(dropped, ","), "label", unlabelled)
	patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
	if err := e.Client.Patch(ctx, obj, patch, client.FieldOwner(executor.FieldManager)); err != nil {
		return events.Report{}, executor.WriteError("release "+s.target(), err)
	}
	var did []string
	if len(dropped) > 0 {
		did = append(did, "owners "+strings.Join(dropped, ", ")+" taken off")
	}
	if unlabelled {
		did = append(did, "label "+clusterv1.ClusterNameLabel+" taken off")
	}
	return events.Report{Message: "released " + s.target() + ": " + strings.Join(did, "; ") + "; nothing else of it changed"}, nil
}

// createdByPlan reports whether an owner reference names an object ferry
// created for the plan, or one of a kind ferry creates that is gone.
func (e *Executor) createdByPlan(ctx context.Context, s *job, ns string, ref metav1.OwnerReference) (bool, error) {
	gvk, ok := gvkOf(ref.Kind)
	if !ok || schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind).Group != gvk.Group {
		return false, nil
	}
	owner := &metav1.PartialObjectMetadata{}
	owner.SetGroupVersionKind(gvk)
	err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, owner)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("release %s: read its owner %s %s: %w", s.target(), ref.Kind, ref.Name, err)
	}
	return owner.UID == ref.UID && owner.Labels[observed.LabelCreatedBy] == s.ev.Plan, nil
}

// keepPrevious records a KamajiControlPlane's preferredAddressTypes
// before ferry first changes them, for a rollback to restore; a later
// change keeps the first record.
func keepPrevious(u *unstructured.Unstructured, have []string, found bool) error {
	ann := u.GetAnnotations()
	if _, ok := ann[observed.AnnotationPreviousAddressTypes]; ok {
		return nil
	}
	var prev []byte
	var err error
	if found {
		prev, err = json.Marshal(have)
	} else {
		prev = []byte("null")
	}
	if err != nil {
		return fmt.Errorf("keep its preferredAddressTypes: %w", err)
	}
	if ann == nil {
		ann = map[string]string{}
	}
	ann[observed.AnnotationPreviousAddressTypes] = string(prev)
	u.SetAnnotations(ann)
	return nil
}

// keepPreviousRef records a Cluster's infrastructureRef before ferry
// first switches it, for a rollback to switch back to.
func keepPreviousRef(c *clusterv1.Cluster) error {
	if _, ok := c.Annotations[observed.AnnotationPreviousInfrastructureRef]; ok {
		return nil
	}
	prev, err := json.Marshal(c.Spec.InfrastructureRef) // null when it had none
	if err != nil {
		return fmt.Errorf("keep its infrastructureRef: %w", err)
	}
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[observed.AnnotationPreviousInfrastructureRef] = string(prev)
	return nil
}

// restore sets back what ferry changed in an object it did not create
// and kept the earlier value of: a Cluster's infrastructureRef, a
// KamajiControlPlane's preferredAddressTypes; and drops the record.
func (e *Executor) restore(ctx context.Context, s *job) (events.Report, error) {
	if s.kind() == step.Cluster {
		return e.restoreInfrastructure(ctx, s)
	}
	var was string
	changes, err := e.modify(ctx, s, func(obj client.Object) ([]string, error) {
		u := obj.(*unstructured.Unstructured)
		ann := u.GetAnnotations()
		prev, ok := ann[observed.AnnotationPreviousAddressTypes]
		if !ok {
			return nil, nil
		}
		var types []string
		if err := json.Unmarshal([]byte(prev), &types); err != nil {
			return nil, failure.Terminal(fmt.Errorf("restore %s: annotation %s=%q: %w", s.target(), observed.AnnotationPreviousAddressTypes, prev, err))
		}
		if types == nil {
			unstructured.RemoveNestedField(u.Object, "spec", "kubelet", "preferredAddressTypes")
			was = "unset"
		} else if err := unstructured.SetNestedStringSlice(u.Object, types, "spec", "kubelet", "preferredAddressTypes"); err != nil {
			return nil, fmt.Errorf("restore %s: %w", s.target(), err)
		} else {
			was = strings.Join(types, ",")
		}
		delete(ann, observed.AnnotationPreviousAddressTypes)
		u.SetAnnotations(ann)
		return []string{"preferredAddressTypes " + was}, nil
	})
	switch {
	case err != nil:
		return events.Report{}, err
	case len(changes) == 0:
		return events.Report{Message: s.target() + " has nothing of ferry's to restore"}, nil
	}
	return events.Report{Message: "restored " + s.target() + ": preferredAddressTypes " + was + ", as before ferry"}, nil
}

// restoreInfrastructure switches a Cluster's infrastructureRef back to
// the one ferry switched away from.
func (e *Executor) restoreInfrastructure(ctx context.Context, s *job) (events.Report, error) {
	var was string
	changes, err := e.modify(ctx, s, func(obj client.Object) ([]string, error) {
		c := obj.(*clusterv1.Cluster)
		prev, ok := c.Annotations[observed.AnnotationPreviousInfrastructureRef]
		if !ok {
			return nil, nil
		}
		var ref *corev1.ObjectReference
		if err := json.Unmarshal([]byte(prev), &ref); err != nil {
			return nil, failure.Terminal(fmt.Errorf("restore %s: annotation %s=%q is not a reference: %w", s.target(), observed.AnnotationPreviousInfrastructureRef, prev, err))
		}
		c.Spec.InfrastructureRef = ref
		delete(c.Annotations, observed.AnnotationPreviousInfrastructureRef)
		was = "none"
		if ref != nil {
			was = ref.Kind + "/" + ref.Name
		}
		return []string{"infrastructureRef " + was}, nil
	})
	switch {
	case err != nil:
		return events.Report{}, err
	case len(changes) == 0:
		return events.Report{Message: s.target() + " has nothing of ferry's to restore"}, nil
	}
	return events.Report{Message: "restored " + s.target() + ": infrastructureRef " + was + ", as before ferry"}, nil
}

// deleteCreated deletes an object ferry created for the plan and lets its
// controller clean up behind it: what CAPO built for an OpenStackCluster
// ferry created (replace) is ferry's to remove too. Only an object with
// ferry's mark is deleted.
func (e *Executor) deleteCreated(ctx context.Context, s *job) (events.Report, error) {
	gvk, _ := gvkOf(s.kind())
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	err := e.Client.Get(ctx, s.key, obj)
	switch {
	case apierrors.IsNotFound(err):
		return events.Report{Message: s.target() + " is gone"}, nil
	case err != nil:
		return events.Report{}, fmt.Errorf("delete %s: %w", s.target(), err)
	case obj.Labels[observed.LabelCreatedBy] != s.ev.Plan:
		return events.Report{}, failure.Terminal(fmt.Errorf("delete %s: it was not created by ferry for plan %s; a rollback leaves it", s.target(), s.ev.Plan))
	case obj.DeletionTimestamp != nil:
		return events.Report{Message: s.target() + " is being deleted by its controller"}, nil
	}
	s.log.Info("deleting", "object", s.target())
	if err := e.Client.Delete(ctx, obj, client.Preconditions{UID: &obj.UID}); err != nil && !apierrors.IsNotFound(err) {
		return events.Report{}, executor.WriteError("delete "+s.target(), err)
	}
	return events.Report{Message: "deleted " + s.target() + "; its controller removes what it built for it"}, nil
}
