package kube

import (
	"context"
	"fmt"

	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
)

// CAPI's pause is spec.paused on a Cluster and the cluster.x-k8s.io/paused
// annotation on the other objects (a MachineDeployment also has
// spec.paused). ferry pauses with the annotation, or spec.paused on a
// Cluster, and marks its own pauses with observed.AnnotationPausedBy (the
// plan's name) so that it lifts only those: a pause someone else set stays.

// unpausable are the kinds whose pause ferry lifts.
var unpausable = map[string]bool{
	step.Cluster: true, step.Machine: true, step.MachineSet: true, step.MachineDeployment: true, step.KubeadmControlPlane: true,
}

// pauseState is the pause state of an object.
type pauseState struct {
	// paused: CAPI does not reconcile the object.
	paused bool
	// byFerry: ferry's annotation is present.
	byFerry bool
	// userFlag: a MachineDeployment's spec.paused, which ferry never sets,
	// so it is always someone else's.
	userFlag bool
}

func pauseOf(obj client.Object) pauseState {
	ann := obj.GetAnnotations()
	_, byFerry := ann[observed.AnnotationPausedBy]
	_, annotated := ann[clusterv1.PausedAnnotation]
	p := pauseState{byFerry: byFerry, paused: annotated}
	switch o := obj.(type) {
	case *clusterv1.Cluster:
		p.paused = o.Spec.Paused
	case *clusterv1.MachineDeployment:
		p.userFlag = o.Spec.Paused
		p.paused = annotated || o.Spec.Paused
	}
	return p
}

// setPause pauses obj and marks the pause as ferry's, by plan.
func setPause(obj client.Object, plan string) {
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	if c, ok := obj.(*clusterv1.Cluster); ok {
		c.Spec.Paused = true
	} else {
		ann[clusterv1.PausedAnnotation] = "true"
	}
	ann[observed.AnnotationPausedBy] = plan
	obj.SetAnnotations(ann)
}

// clearPause lifts ferry's pause of obj, and its mark.
func clearPause(obj client.Object) {
	if c, ok := obj.(*clusterv1.Cluster); ok {
		c.Spec.Paused = false
	}
	ann := obj.GetAnnotations()
	delete(ann, clusterv1.PausedAnnotation)
	delete(ann, observed.AnnotationPausedBy)
	obj.SetAnnotations(ann)
}

// pause pauses the target unless it is paused already; a pause that is
// there stays whoever's it is, so that ferry never comes to lift a pause
// that a person set.
func (e *Executor) pause(ctx context.Context, s *job) (events.Report, error) {
	var before pauseState
	deleting := false
	changes, err := e.modify(ctx, s, func(obj client.Object) ([]string, error) {
		before = pauseOf(obj)
		// CAPI does not finish deleting a paused object: leave one that
		// is going as it is.
		if deleting = obj.GetDeletionTimestamp() != nil; before.paused || deleting {
			return nil, nil
		}
		setPause(obj, s.ev.Plan)
		return []string{"paused"}, nil
	})
	switch {
	case err != nil:
		return events.Report{}, err
	case deleting && !before.paused:
		return events.Report{Message: s.target() + " is being deleted: not paused, so that CAPI can finish"}, nil
	case len(changes) > 0:
		return events.Report{Message: "paused " + s.target()}, nil
	case before.byFerry && !before.userFlag:
		return events.Report{Message: s.target() + " is already paused by ferry"}, nil
	}
	return events.Report{Message: s.target() + " is already paused, not by ferry: the pause stays its owner's"}, nil
}

// unpause lifts the target's pause when ferry set it. A pause without
// ferry's mark is someone else's: terminal, for a person to decide.
func (e *Executor) unpause(ctx context.Context, s *job) (events.Report, error) {
	wasPaused := false
	changes, err := e.modify(ctx, s, func(obj client.Object) ([]string, error) {
		p := pauseOf(obj)
		wasPaused = p.paused
		switch {
		case p.userFlag || (p.paused && !p.byFerry):
			return nil, failure.Terminal(fmt.Errorf("unpause %s: paused by someone else; ferry never lifts a pause it did not set", s.target()))
		case !p.paused && !p.byFerry:
			return nil, nil
		}
		// Paused by ferry, or a stray mark of a pause someone lifted
		// already: either way ferry's annotations go.
		clearPause(obj)
		return []string{"unpaused"}, nil
	})
	switch {
	case err != nil:
		return events.Report{}, err
	case len(changes) > 0 && wasPaused:
		return events.Report{Message: "unpaused " + s.target()}, nil
	}
	return events.Report{Message: s.target() + " is not paused"}, nil
}
