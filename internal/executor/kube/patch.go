package kube

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/controlplane/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/executor"
	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
)

// patchable are the kinds the patch action changes.
var patchable = map[string]bool{
	step.Cluster: true, step.KubeadmControlPlane: true, step.Machine: true, step.MachineSet: true, step.MachineDeployment: true, step.KamajiControlPlane: true,
}

// modify reads the target, lets change edit it, and writes the difference
// back as a merge patch. change returns what it changed, for the report;
// nothing changed means nothing is written. The patch carries the
// resourceVersion it was computed from, so a decision taken on what was
// read (is it paused, and by whom?) never lands on an object someone
// changed meanwhile: that is a conflict, and the next attempt decides again.
func (e *Executor) modify(ctx context.Context, s *job, change func(client.Object) ([]string, error)) ([]string, error) {
	obj := newObject(s.kind())
	if obj == nil {
		return nil, failure.Terminal(fmt.Errorf("kube executor: cannot read kind %s", s.kind()))
	}
	if err := e.get(ctx, s, obj); err != nil {
		return nil, err
	}
	before := obj.DeepCopyObject().(client.Object)
	changes, err := change(obj)
	if err != nil || len(changes) == 0 {
		return nil, err
	}
	s.log.Info("patching", "object", s.target(), "changes", strings.Join(changes, ", "))
	patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
	if err := e.Client.Patch(ctx, obj, patch, client.FieldOwner(executor.FieldManager)); err != nil {
		return nil, executor.WriteError("patch "+s.target(), err)
	}
	return changes, nil
}

// patch sets the fields the step's parameters name. Each parameter is
// compared first, so a second run writes nothing.
func (e *Executor) patch(ctx context.Context, s *job) (events.Report, error) {
	names := make([]string, 0, len(s.ev.Step.Params))
	for name := range s.ev.Step.Params {
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return events.Report{}, failure.Terminal(fmt.Errorf("patch %s: the step names no field", s.target()))
	}
	changes, err := e.modify(ctx, s, func(obj client.Object) ([]string, error) {
		var changes []string
		for _, name := range names {
			change, err := patchField(obj, s, name, s.params().Get(name))
			if err != nil {
				return nil, err
			}
			if change != "" {
				changes = append(changes, change)
			}
		}
		return changes, nil
	})
	if err != nil {
		return events.Report{}, err
	}
	if len(changes) == 0 {
		return events.Report{Message: s.target() + " already has " + strings.Join(names, ", ") + " as the step asks"}, nil
	}
	return events.Report{Message: "patched " + s.target() + ": " + strings.Join(changes, ", ")}, nil
}

// patchField sets one field on obj and says what changed; "" when it
// already had the value. A field the kind does not have is terminal.
func patchField(obj client.Object, s *job, name, value string) (string, error) {
	unsupported := failure.Terminal(fmt.Errorf("patch %s: ferry does not patch %s of a %s", s.target(), name, s.kind()))
	switch name {
	case step.ParamPaused:
		// A pause already there stays whoever's it is.
		if value != step.Bool(true) {
			return "", failure.Terminal(fmt.Errorf("patch %s: paused=%q: ferry only pauses in a patch; unpause is its own step", s.target(), value))
		}
		if pauseOf(obj).paused {
			return "", nil
		}
		setPause(obj, s.ev.Plan)
		return "paused", nil
	case step.ParamInfrastructureRef, step.ParamControlPlaneRef, step.ParamMachineTemplateInfraRef:
		want, err := ref(name, value, s.key.Namespace)
		if err != nil {
			return "", err
		}
		field := refField(obj, name)
		if field == nil {
			return "", unsupported
		}
		if sameRef(field.get(), want) {
			return "", nil
		}
		if c, ok := obj.(*clusterv1.Cluster); ok && name == step.ParamInfrastructureRef {
			if err := keepPreviousRef(c); err != nil {
				return "", fmt.Errorf("patch %s: %w", s.target(), err)
			}
		}
		field.set(want)
		return name + " " + value, nil
	case step.ParamRolloutAfter:
		return rollout(obj, s, value)
	case step.ParamPreferredAddressTypes:
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || s.kind() != step.KamajiControlPlane {
			return "", unsupported
		}
		want := strings.Split(value, ",")
		have, found, _ := unstructured.NestedStringSlice(u.Object, "spec", "kubelet", "preferredAddressTypes")
		if slices.Equal(have, want) {
			return "", nil
		}
		if err := keepPrevious(u, have, found); err != nil {
			return "", fmt.Errorf("patch %s: %w", s.target(), err)
		}
		if err := unstructured.SetNestedStringSlice(u.Object, want, "spec", "kubelet", "preferredAddressTypes"); err != nil {
			return "", fmt.Errorf("patch %s: set %s: %w", s.target(), name, err)
		}
		return name + " " + value, nil
	}
	return "", unsupported
}

// refSlot reads and writes one reference field of an object.
type refSlot struct {
	get func() *corev1.ObjectReference
	set func(*corev1.ObjectReference)
}

// byValue is the slot of a reference held by value.
func byValue(field *corev1.ObjectReference) *refSlot {
	return &refSlot{get: func() *corev1.ObjectReference { return field }, set: func(r *corev1.ObjectReference) { *field = *r }}
}

// byPointer is the slot of a reference that may be absent.
func byPointer(field **corev1.ObjectReference) *refSlot {
	return &refSlot{get: func() *corev1.ObjectReference { return *field }, set: func(r *corev1.ObjectReference) { *field = r }}
}

// refField returns the reference field a parameter names, or nil when
// the object has no such field.
func refField(obj client.Object, name string) *refSlot {
	switch o := obj.(type) {
	case *clusterv1.Cluster:
		switch name {
		case step.ParamInfrastructureRef:
			return byPointer(&o.Spec.InfrastructureRef)
		case step.ParamControlPlaneRef:
			return byPointer(&o.Spec.ControlPlaneRef)
		}
	case *clusterv1.Machine:
		if name == step.ParamInfrastructureRef {
			return byValue(&o.Spec.InfrastructureRef)
		}
	case *clusterv1.MachineSet:
		if name == step.ParamInfrastructureRef {
			return byValue(&o.Spec.Template.Spec.InfrastructureRef)
		}
	case *clusterv1.MachineDeployment:
		if name == step.ParamInfrastructureRef {
			return byValue(&o.Spec.Template.Spec.InfrastructureRef)
		}
	case *controlplanev1.KubeadmControlPlane:
		if name == step.ParamMachineTemplateInfraRef {
			return byValue(&o.Spec.MachineTemplate.InfrastructureRef)
		}
	}
	return nil
}

// rollout sets rolloutAfter, which makes CAPI replace every machine
// created before it. "now" is the time of the write; a rolloutAfter that is
// already at or after the step was published was set by this step (or a
// later one), so a redelivery does not start a second rollout.
func rollout(obj client.Object, s *job, value string) (string, error) {
	var field **metav1.Time
	switch o := obj.(type) {
	case *controlplanev1.KubeadmControlPlane:
		field = &o.Spec.RolloutAfter
	case *clusterv1.MachineDeployment:
		field = &o.Spec.RolloutAfter
	default:
		return "", failure.Terminal(fmt.Errorf("patch %s: ferry does not patch rolloutAfter of a %s", s.target(), s.kind()))
	}
	if value != step.RolloutNow {
		return "", failure.Terminal(fmt.Errorf("patch %s: rolloutAfter=%q: only \"now\" is understood", s.target(), value))
	}
	if have := *field; have != nil && !have.Time.Before(s.ev.PublishedAt.Truncate(time.Second)) {
		return "", nil
	}
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	*field = &now
	return "rolloutAfter " + now.Format(time.RFC3339), nil
}

// deleteMachineDeployment deletes the MachineDeployment the step names,
// and nothing else: CAPI's garbage collection removes its MachineSets and
// Machines, which it owns. One of another cluster is not touched.
func (e *Executor) deleteMachineDeployment(ctx context.Context, s *job) (events.Report, error) {
	var md clusterv1.MachineDeployment
	err := e.Client.Get(ctx, s.key, &md)
	switch {
	case apierrors.IsNotFound(err):
		return events.Report{Message: s.target() + " is already gone"}, nil
	case err != nil:
		return events.Report{}, fmt.Errorf("get %s: %w", s.target(), err)
	case md.Spec.ClusterName != s.cluster():
		return events.Report{}, failure.Terminal(fmt.Errorf("delete %s: it belongs to cluster %q, not %q: ferry deletes only what its plan names",
			s.target(), md.Spec.ClusterName, s.cluster()))
	}
	if p := pauseOf(&md); p.paused && (!p.byFerry || p.userFlag) {
		return events.Report{}, failure.Terminal(fmt.Errorf("delete %s: it is paused, not by ferry, and CAPI does not delete the Machines of a paused MachineDeployment: lift that pause and cleanup goes on",
			s.target()))
	}
	if md.DeletionTimestamp == nil {
		if err := e.checkMarked(ctx, s, &md); err != nil {
			return events.Report{}, err
		}
		s.log.Info("deleting", "object", s.target())
		// The UID precondition keeps a delivery that read the object from
		// deleting a namesake created after it.
		err = e.Client.Delete(ctx, &md, client.Preconditions{UID: &md.UID})
		switch {
		case apierrors.IsNotFound(err):
			return events.Report{Message: s.target() + " is already gone"}, nil
		case err != nil:
			return events.Report{}, executor.WriteError("delete "+s.target(), err)
		}
	}
	// ferry paused the old pool in prepare. CAPI reconciles no paused
	// MachineDeployment, its deletion included: lift the pause once the
	// deletion has begun, so that the pool never runs unpaused otherwise.
	if pauseOf(&md).byFerry {
		if err := e.liftPauseOfDeleted(ctx, s); err != nil {
			return events.Report{}, executor.WriteError("delete "+s.target()+": lift ferry's pause so that CAPI deletes it", err)
		}
	}
	return events.Report{Message: "deleted " + s.target() + "; CAPI removes its MachineSets and Machines"}, nil
}

// checkMarked lets a MachineDeployment be deleted only with the plan's
// mark: observed.LabelCreatedBy (a pool ferry created, which a rollback
// deletes) or observed.LabelReplacedBy (an old pool that prepare paused
// and labelled). deploy/'s admission policy refuses ferry's service
// account any other; here the refusal is terminal, with what a person
// can do. An old pool ferry paused for the plan (its pause mark) before
// ferry labelled old pools gets the label now: its pause says prepare
// ran for it.
func (e *Executor) checkMarked(ctx context.Context, s *job, md *clusterv1.MachineDeployment) error {
	plan := s.ev.Plan
	switch {
	case md.Labels[observed.LabelCreatedBy] == plan || md.Labels[observed.LabelReplacedBy] == plan:
		return nil
	case md.Annotations[observed.AnnotationPausedBy] != plan:
		return failure.Terminal(fmt.Errorf("delete %s: it has neither label %s=%s (prepare sets it on the old pools the plan names) nor %s=%s (a pool ferry created), and ferry deletes no other; to confirm that the plan replaces it: kubectl label -n %s machinedeployment %s %s=%s",
			s.target(), observed.LabelReplacedBy, plan, observed.LabelCreatedBy, plan, md.Namespace, md.Name, observed.LabelReplacedBy, plan))
	}
	before := md.DeepCopy()
	markReplaced(md, plan)
	s.log.Info("labelling an old pool that ferry paused before it labelled old pools", "object", s.target(), "label", observed.LabelReplacedBy+"="+plan)
	patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
	if err := e.Client.Patch(ctx, md, patch, client.FieldOwner(executor.FieldManager)); err != nil {
		return executor.WriteError("delete "+s.target()+": label it "+observed.LabelReplacedBy, err)
	}
	return nil
}

// liftPauseOfDeleted lifts ferry's pause of the MachineDeployment being
// deleted, which may be gone already.
func (e *Executor) liftPauseOfDeleted(ctx context.Context, s *job) error {
	var md clusterv1.MachineDeployment
	if err := e.Client.Get(ctx, s.key, &md); err != nil {
		return client.IgnoreNotFound(err)
	}
	before := md.DeepCopy()
	clearPause(&md)
	s.log.Info("lifting ferry's pause of the deleted object", "object", s.target())
	return client.IgnoreNotFound(e.Client.Patch(ctx, &md, client.MergeFrom(before), client.FieldOwner(executor.FieldManager)))
}
