package workload

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/executor"
	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/kube"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
)

// readManifest reads and decodes a manifest from the plans repository at
// the step's revision. A file that is missing or does not decode is
// terminal: the reviewed commit has to change. A repository that cannot be
// fetched is retryable.
func (e *Executor) readManifest(ctx context.Context, s *job) ([]*unstructured.Unstructured, error) {
	path := s.ev.Step.Target.Name
	if e.Repo == nil {
		return nil, failure.Terminal(fmt.Errorf("manifest %s: the workload executor has no plans repository", path))
	}
	repo, err := e.Repo(ctx, s.ev.Revision)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: open plans repository at %s: %w", path, s.ev.Revision, err)
	}
	data, err := fs.ReadFile(repo, path)
	if err != nil {
		return nil, failure.Terminal(fmt.Errorf("manifest %s at %s: %w", path, s.ev.Revision, err))
	}
	objs, err := kube.DecodeManifest(data)
	if err != nil {
		return nil, failure.Terminal(fmt.Errorf("manifest %s at %s: %w", path, s.ev.Revision, err))
	}
	return objs, nil
}

// checkNoSecrets refuses a manifest with a Secret: the plans repository is
// read by everyone who reviews a plan, and Secrets never go through Git
// (docs/architecture.md, "Safety rules"). Only names are reported, never data.
func checkNoSecrets(path string, objs []*unstructured.Unstructured) error {
	var names []string
	for _, u := range objs {
		if u.GetKind() == step.Secret && u.GroupVersionKind().Group == "" {
			names = append(names, strings.TrimPrefix(manifestObjectName(u), "Secret "))
		}
	}
	if len(names) > 0 {
		return failure.Terminal(fmt.Errorf("manifest %s holds Secret %s: secrets do not belong in the plans repository; create them in the workload cluster by other means and remove them from the manifest",
			path, strings.Join(names, ", ")))
	}
	return nil
}

// applyOrder puts Namespaces and CustomResourceDefinitions first, as
// kubectl and Helm do, so that the objects that live in them can be
// created in the same pass. Otherwise the file's order is kept.
func applyOrder(objs []*unstructured.Unstructured) {
	rank := func(u *unstructured.Unstructured) int {
		switch u.GetKind() {
		case "Namespace":
			return 0
		case "CustomResourceDefinition":
			return 1
		}
		return 2
	}
	sort.SliceStable(objs, func(i, j int) bool { return rank(objs[i]) < rank(objs[j]) })
}

// apply server-side applies every object of a manifest, as field manager
// ferry, without forcing: a field another manager owns is a conflict that
// is reported, not overwritten.
func (e *Executor) apply(ctx context.Context, s *job, c client.Client) (events.Report, error) {
	path := s.ev.Step.Target.Name
	objs, err := e.readManifest(ctx, s)
	if err != nil {
		return events.Report{}, err
	}
	if err := checkNoSecrets(path, objs); err != nil {
		return events.Report{}, err
	}
	ccm := ccmScheduling(s)
	applyOrder(objs)
	// Everything that needs no API call first, so that a manifest the
	// plan cannot apply changes nothing.
	scheduled := 0
	for _, u := range objs {
		u.SetAnnotations(mergeAnnotations(u.GetAnnotations(), map[string]string{
			AnnotationPlan:     s.ev.Plan,
			AnnotationRevision: s.ev.Revision,
		}))
		if ccm != nil && isPodController(u) {
			if err := scheduleCCM(u, ccm); err != nil {
				return events.Report{}, failure.Terminal(fmt.Errorf("apply manifest %s: %s: %w", path, manifestObjectName(u), err))
			}
			scheduled++
		}
	}
	if ccm != nil && scheduled == 0 {
		return events.Report{}, failure.Terminal(fmt.Errorf("apply manifest %s: it is the plan's cloud controller manager but holds no DaemonSet or Deployment to schedule as spec.manifests.cloudControllerManager says", path))
	}

	for _, u := range objs {
		// One object at a time: a kind that a CustomResourceDefinition
		// earlier in the manifest defines is known only once that is applied.
		if err := prepareForApply(c, u); err != nil {
			return events.Report{}, fmt.Errorf("apply manifest %s: %s: %w", path, manifestObjectName(u), err)
		}
		if err := markCreated(ctx, c, u, s.ev.Plan); err != nil {
			return events.Report{}, fmt.Errorf("apply manifest %s: %s: %w", path, manifestObjectName(u), err)
		}
		s.log.InfoContext(ctx, "applying to the workload cluster", "manifest", path, "object", manifestObjectName(u))
		err := c.Patch(ctx, u, client.Apply, client.FieldOwner(executor.FieldManager))
		switch {
		case apierrors.IsConflict(err):
			return events.Report{}, fmt.Errorf("apply manifest %s: %s: fields owned by another field manager; ferry does not force ownership, so remove them there or from the manifest: %w", path, manifestObjectName(u), err)
		case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
			// The same request is rejected every time: the manifest has to change.
			return events.Report{}, failure.Terminal(fmt.Errorf("apply manifest %s: %s: rejected by the API server: %w", path, manifestObjectName(u), err))
		case err != nil:
			return events.Report{}, fmt.Errorf("apply manifest %s: %s: %w", path, manifestObjectName(u), err)
		}
		if ccm != nil && isPodController(u) {
			if err := checkCCMScheduling(u, ccm); err != nil {
				return events.Report{}, fmt.Errorf("apply manifest %s: %s: %w", path, manifestObjectName(u), err)
			}
		}
	}
	msg := fmt.Sprintf("applied %d objects of %s at %s", len(objs), path, shortCommit(s.ev.Revision))
	if ccm != nil {
		msg += " with the plan's scheduling (" + describeScheduling(ccm) + ")"
	}
	return events.Report{Message: msg}, nil
}

// prepareForApply strips what an apply request must not carry and puts
// namespaced objects without a namespace into default, as kubectl does.
func prepareForApply(c client.Client, u *unstructured.Unstructured) error {
	for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "managedFields", "generation", "selfLink"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	// The API server ignores status in an apply of the main resource, and
	// ferry has no business owning it.
	unstructured.RemoveNestedField(u.Object, "status")
	namespaced, err := c.IsObjectNamespaced(u)
	if err != nil {
		// An unknown kind may be a CRD the same manifest just created, not
		// yet served: the next attempt finds it.
		return fmt.Errorf("find its API: %w", err)
	}
	switch {
	case namespaced && u.GetNamespace() == "":
		u.SetNamespace("default")
	case !namespaced:
		u.SetNamespace("")
	}
	return nil
}

// ccmScheduling is how the step schedules the manifest's pods: set on
// the apply of the plan's cloud controller manager (step.Scheduling),
// nil on every other.
func ccmScheduling(s *job) *step.Scheduling { return s.ev.Inputs.Scheduling }

func isPodController(u *unstructured.Unstructured) bool {
	return u.GroupVersionKind().Group == "apps" && (u.GetKind() == "DaemonSet" || u.GetKind() == "Deployment")
}

// scheduleCCM puts the step's node selector and tolerations on the pod
// template. A nil selector keeps the manifest's; an empty one removes it
// (a Kamaji cluster has no control-plane nodes to select, seed 004).
// Tolerations, when the step has any, replace the manifest's.
func scheduleCCM(u *unstructured.Unstructured, ccm *step.Scheduling) error {
	podSpec := []string{"spec", "template", "spec"}
	if ccm.NodeSelector != nil {
		field := append(podSpec, "nodeSelector")
		if len(ccm.NodeSelector) == 0 {
			unstructured.RemoveNestedField(u.Object, field...)
		} else if err := unstructured.SetNestedStringMap(u.Object, ccm.NodeSelector, field...); err != nil {
			return fmt.Errorf("set nodeSelector: %w", err)
		}
	}
	if len(ccm.Tolerations) > 0 {
		tols := make([]any, 0, len(ccm.Tolerations))
		for _, t := range ccm.Tolerations {
			m := map[string]any{}
			for k, v := range map[string]string{"key": t.Key, "operator": t.Operator, "value": t.Value, "effect": t.Effect} {
				if v != "" {
					m[k] = v
				}
			}
			tols = append(tols, m)
		}
		if err := unstructured.SetNestedSlice(u.Object, tols, append(podSpec, "tolerations")...); err != nil {
			return fmt.Errorf("set tolerations: %w", err)
		}
	}
	return nil
}

// checkCCMScheduling reads back the applied object. A node selector the
// plan removes can survive the apply when another field manager (a hand
// `kubectl apply` of the same manifest, as seed 004 describes) owns it:
// apply only drops fields that ferry owned. The CCM would then wait for
// control-plane nodes that a Kamaji cluster never has, so say so rather
// than report success.
func checkCCMScheduling(applied *unstructured.Unstructured, ccm *step.Scheduling) error {
	if ccm.NodeSelector == nil || len(ccm.NodeSelector) > 0 {
		return nil
	}
	sel, _, _ := unstructured.NestedStringMap(applied.Object, "spec", "template", "spec", "nodeSelector")
	if len(sel) == 0 {
		return nil
	}
	var owners []string
	for _, m := range applied.GetManagedFields() {
		if m.Manager != executor.FieldManager && m.FieldsV1 != nil && bytes.Contains(m.FieldsV1.Raw, []byte(`"f:nodeSelector"`)) {
			owners = append(owners, m.Manager)
		}
	}
	return fmt.Errorf("the plan says no nodeSelector, but the pod template keeps %v, owned by field manager %s; ferry does not force ownership: remove the nodeSelector there (kubectl edit) and the step goes on",
		sel, strings.Join(owners, ", "))
}

func describeScheduling(ccm *step.Scheduling) string {
	var parts []string
	switch {
	case ccm.NodeSelector == nil:
		parts = append(parts, "nodeSelector from the manifest")
	case len(ccm.NodeSelector) == 0:
		parts = append(parts, "no nodeSelector")
	default:
		parts = append(parts, fmt.Sprintf("nodeSelector %v", ccm.NodeSelector))
	}
	if len(ccm.Tolerations) > 0 {
		parts = append(parts, fmt.Sprintf("%d tolerations", len(ccm.Tolerations)))
	}
	return strings.Join(parts, ", ")
}

func manifestObjectName(u *unstructured.Unstructured) string {
	if u.GetNamespace() != "" {
		return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
	}
	return u.GetKind() + " " + u.GetName()
}

func mergeAnnotations(a, b map[string]string) map[string]string {
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// shortCommit abbreviates a Git commit hash for a one-line report.
func shortCommit(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// markCreated annotates u with observed.LabelCreatedBy when ferry's apply
// creates it (or created it before): a rollback deletes only such
// objects, and leaves those that were there before.
func markCreated(ctx context.Context, c client.Client, u *unstructured.Unstructured, plan string) error {
	have := &unstructured.Unstructured{}
	have.SetGroupVersionKind(u.GroupVersionKind())
	err := c.Get(ctx, client.ObjectKeyFromObject(u), have)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("check whether it exists: %w", err)
	case have.GetAnnotations()[observed.LabelCreatedBy] != plan:
		return nil
	}
	u.SetAnnotations(mergeAnnotations(u.GetAnnotations(), map[string]string{observed.LabelCreatedBy: plan}))
	return nil
}

// deleteManifest deletes the objects of a manifest that ferry's apply
// created for the plan, in the reverse of the order they are applied in;
// objects that were there before ferry applied the manifest stay (with
// what the apply changed in them).
func (e *Executor) deleteManifest(ctx context.Context, s *job, c client.Client) (events.Report, error) {
	path := s.ev.Step.Target.Name
	objs, err := e.readManifest(ctx, s)
	if err != nil {
		return events.Report{}, err
	}
	applyOrder(objs)
	deleted, left := 0, 0
	for i := len(objs) - 1; i >= 0; i-- {
		u := objs[i]
		if err := prepareForApply(c, u); err != nil {
			return events.Report{}, fmt.Errorf("delete manifest %s: %s: %w", path, manifestObjectName(u), err)
		}
		have := &unstructured.Unstructured{}
		have.SetGroupVersionKind(u.GroupVersionKind())
		err := c.Get(ctx, client.ObjectKeyFromObject(u), have)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return events.Report{}, fmt.Errorf("delete manifest %s: %s: %w", path, manifestObjectName(u), err)
		case have.GetAnnotations()[observed.LabelCreatedBy] != s.ev.Plan:
			left++
			continue
		}
		s.log.InfoContext(ctx, "deleting from the workload cluster", "manifest", path, "object", manifestObjectName(u))
		uid := have.GetUID()
		err = c.Delete(ctx, have, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) {
			return events.Report{}, fmt.Errorf("delete manifest %s: %s: %w", path, manifestObjectName(u), err)
		}
		deleted++
	}
	msg := fmt.Sprintf("deleted %d objects of %s that ferry created", deleted, path)
	if left > 0 {
		msg += fmt.Sprintf("; %d that were there before left", left)
	}
	return events.Report{Message: msg}, nil
}
