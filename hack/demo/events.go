package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/ferry-dev/ferry/internal/clusterevents"
)

// clusterEvents prints the Events on the scenario's Cluster as the end of
// `kubectl describe cluster` shows them, read from the management API
// server: ferry's (one per phase transition and failed step) among the
// CAPI controllers'. Each phase of succeeded must have ferry's
// PhaseSucceeded Event there ("Phase cluster succeeded …"), waited for a
// while (the recorder writes in the background); it fails otherwise. With
// no such phases (a rollback, whose Cluster may be gone) it is a view: a
// failure to read them is said, not returned.
func (w *world) clusterEvents(ctx context.Context, succeeded []string) error {
	name := w.sc.cluster
	w.out.say("\n==> the Cluster's events: what `kubectl describe cluster %s` shows", name)
	var list []corev1.Event
	var missing []string
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; {
		list, err = clusterevents.List(ctx, w.fx.cloud.Mgmt.Client, "default/"+name)
		missing = missingSucceeded(list, succeeded)
		if (err == nil && len(missing) == 0) || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		w.out.say("    (not read: %v)", err)
		if len(succeeded) > 0 {
			return fmt.Errorf("the Cluster's events: %w", err)
		}
		return nil
	}
	w.out.say("%s", strings.TrimRight(eventsTable(list, time.Now()), "\n"))
	if len(missing) > 0 {
		return fmt.Errorf("ferry wrote no %s Event on Cluster %s for phase %s", clusterevents.ReasonPhaseSucceeded, name, strings.Join(missing, ", "))
	}
	return nil
}

// missingSucceeded are the phases without ferry's PhaseSucceeded Event
// among events.
func missingSucceeded(events []corev1.Event, phases []string) []string {
	var missing []string
	for _, ph := range phases {
		found := false
		for _, e := range events {
			if e.Source.Component == clusterevents.Component && e.Reason == clusterevents.ReasonPhaseSucceeded &&
				strings.HasPrefix(e.Message, "Phase "+ph+" succeeded") {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, ph)
		}
	}
	return missing
}

// eventsTable is kubectl describe's Events section: Type, Reason, Age
// ("5m", or "2m (x3 over 9m)" for a repeated Event), From and Message,
// oldest first; "Events: <none>" without any.
func eventsTable(events []corev1.Event, now time.Time) string {
	if len(events) == 0 {
		return "Events:  <none>\n"
	}
	var b strings.Builder
	b.WriteString("Events:\n")
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprint(tw, "  Type\tReason\tAge\tFrom\tMessage\n  ----\t------\t----\t----\t-------\n")
	for _, e := range events {
		age := duration.HumanDuration(now.Sub(e.LastTimestamp.Time))
		if e.Count > 1 {
			age = fmt.Sprintf("%s (x%d over %s)", age, e.Count, duration.HumanDuration(now.Sub(e.FirstTimestamp.Time)))
		}
		from := e.Source.Component
		if e.Source.Host != "" {
			from += ", " + e.Source.Host
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", e.Type, e.Reason, age, from, strings.TrimSpace(e.Message))
	}
	_ = tw.Flush()
	return b.String()
}
