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
// that a person set. A MachineDeployment (only replace's prepare pauses
// one: an old pool the plan names) also gets observed.LabelReplacedBy,
// the mark without which cleanup does not delete it (markReplaced).
func (e *Executor) pause(ctx context.Context, s *job) (events.Report, error) {
	var before pauseState
	deleting, paused, marked := false, false, false
	_, err := e.modify(ctx, s, func(obj client.Object) ([]string, error) {
		before = pauseOf(obj)
		// CAPI does not finish deleting a paused object: leave one that
		// is going as it is.
		if deleting = obj.GetDeletionTimestamp() != nil; deleting {
			return nil, nil
		}
		var changes []string
		if s.kind() == step.MachineDeployment && markReplaced(obj, s.ev.Plan) {
			marked = true
			changes = append(changes, "labelled "+observed.LabelReplacedBy+"="+s.ev.Plan)
		}
		if !before.paused {
			setPause(obj, s.ev.Plan)
			paused = true
			changes = append(changes, "paused")
		}
		return changes, nil
	})
	mark := ""
	if marked {
		mark = "; labelled " + observed.LabelReplacedBy + "=" + s.ev.Plan + " for cleanup to delete"
	}
	switch {
	case err != nil:
		return events.Report{}, err
	case deleting && !before.paused:
		return events.Report{Message: s.target() + " is being deleted: not paused, so that CAPI can finish"}, nil
	case paused:
		return events.Report{Message: "paused " + s.target() + mark}, nil
	case before.byFerry && !before.userFlag:
		return events.Report{Message: s.target() + " is already paused by ferry" + mark}, nil
	}
	return events.Report{Message: s.target() + " is already paused, not by ferry: the pause stays its owner's" + mark}, nil
}

// markReplaced gives obj observed.LabelReplacedBy with the plan's name,
// and says whether it had to.
func markReplaced(obj client.Object, plan string) bool {
	labels := obj.GetLabels()
	if labels[observed.LabelReplacedBy] == plan {
		return false
	}
	if labels == nil {
		labels = map[string]string{}
	}
	labels[observed.LabelReplacedBy] = plan
	obj.SetLabels(labels)
	return true
}

// unmarkReplaced takes the plan's observed.LabelReplacedBy off obj, and
// says whether it had it.
func unmarkReplaced(obj client.Object, plan string) bool {
	labels := obj.GetLabels()
	if labels[observed.LabelReplacedBy] != plan {
		return false
	}
	delete(labels, observed.LabelReplacedBy)
	obj.SetLabels(labels)
	return true
}

// unpause lifts the target's pause when ferry set it. A pause without
// ferry's mark is someone else's: terminal, for a person to decide. An
// old pool (undo of prepare) also loses the plan's
// observed.LabelReplacedBy: the plan no longer deletes it.
func (e *Executor) unpause(ctx context.Context, s *job) (events.Report, error) {
	wasPaused, unmarked := false, false
	changes, err := e.modify(ctx, s, func(obj client.Object) ([]string, error) {
		p := pauseOf(obj)
		wasPaused = p.paused
		if p.userFlag || (p.paused && !p.byFerry) {
			return nil, failure.Terminal(fmt.Errorf("unpause %s: paused by someone else; ferry never lifts a pause it did not set", s.target()))
		}
		var changes []string
		if p.paused || p.byFerry {
			// Paused by ferry, or a stray mark of a pause someone lifted
			// already: either way ferry's annotations go.
			clearPause(obj)
			changes = append(changes, "unpaused")
		}
		if unmarked = unmarkReplaced(obj, s.ev.Plan); unmarked {
			changes = append(changes, "label "+observed.LabelReplacedBy+" taken off")
		}
		return changes, nil
	})
	unmark := ""
	if unmarked {
		unmark = "; label " + observed.LabelReplacedBy + " taken off"
	}
	switch {
	case err != nil:
		return events.Report{}, err
	case len(changes) > 0 && wasPaused:
		return events.Report{Message: "unpaused " + s.target() + unmark}, nil
	}
	return events.Report{Message: s.target() + " is not paused" + unmark}, nil
}
