package planner

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/ferry-dev/ferry/api/v1alpha1"
)

// Render writes the plan's effective settings (defaults applied) and its
// phases with the steps left, as `reconciler plan` prints them and the
// pull-request preview shows them. Steps of approved phases are listed one
// per line, numbered by group: steps with the same number run in parallel.
// Phases not yet approved show only how many steps they have left.
func Render(w io.Writer, p *v1alpha1.MigrationPlan, r *Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Plan %s: cluster %s, strategy %s, control plane %s\n", r.Plan, r.Cluster, r.Strategy, r.Provider)
	approve := r.Approve
	if approve == "" {
		approve = "(nothing)"
	}
	fmt.Fprintf(&b, "Approved up to: %s\n", approve)
	if r.Rollback != "" {
		fmt.Fprintf(&b, "Rolling back to: %s (every phase after it is undone, the last first)\n", r.Rollback)
	}
	b.WriteString("\nSettings (defaults applied):\n")
	for _, line := range Settings(p) {
		fmt.Fprintf(&b, "  %s\n", line)
	}
	b.WriteString("\nPhases:\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, ph := range r.Phases {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", ph.Name, ph.State, phaseSummary(r, ph))
	}
	tw.Flush()
	for _, ph := range r.Phases {
		if ph.State == Succeeded || ph.State == Pending || len(ph.Groups) == 0 {
			continue
		}
		switch {
		case ph.Undo:
			fmt.Fprintf(&b, "\nSteps that undo phase %s:\n", ph.Name)
		default:
			fmt.Fprintf(&b, "\nSteps of phase %s:\n", ph.Name)
		}
		if ph.Name == p.PointOfNoReturn() && !ph.Undo {
			fmt.Fprintf(&b, "  Phase %s is the point of no return: once it has begun, no phase of this plan can be rolled back.\n", ph.Name)
		}
		for i, g := range ph.Groups {
			for j, s := range g.Steps {
				num := fmt.Sprintf("%d.", i+1)
				if j > 0 {
					num = strings.Repeat(" ", len(num))
				}
				fmt.Fprintf(&b, "  %s %s\n", num, s)
			}
		}
	}
	renderInventory(&b, r.Inventory)
	if len(r.NotUndone) > 0 {
		b.WriteString("\nWhat the rollback leaves as it is:\n")
		for _, line := range r.NotUndone {
			fmt.Fprintf(&b, "  - %s\n", line)
		}
	}
	b.WriteString("\n")
	switch next := r.Next(); {
	case r.Stopped != "":
		fmt.Fprintf(&b, "Stopped: %s\n", r.Stopped)
	case next != nil:
		fmt.Fprintf(&b, "Next: %d step(s) of phase %s.\n", len(next.Steps), r.Runnable)
	default:
		b.WriteString("Next: nothing to run. " + idleReason(r) + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func phaseSummary(r *Result, ph Phase) string {
	left := 0
	for _, g := range ph.Groups {
		left += len(g.Steps)
	}
	counts := fmt.Sprintf("%d done, %d left", ph.Done, left)
	if ph.Undo {
		counts = fmt.Sprintf("undo: %d done, %d left", ph.Done, left)
	}
	parts := []string{counts}
	if ph.Name == r.Runnable {
		parts = append(parts, "runs next")
	}
	if ph.Reason != "" {
		parts = append(parts, ph.Reason)
	}
	return strings.Join(parts, "; ")
}

// idleReason says why nothing runs, from the first phase that is not done.
func idleReason(r *Result) string {
	if r.RolledBack {
		return "The rollback is done: every phase after " + r.Rollback + " is rolled back; remove spec.rollback and raise spec.approve to migrate forward again."
	}
	for _, ph := range r.Phases {
		switch ph.State {
		case Succeeded, RolledBack:
			continue
		case Pending:
			return fmt.Sprintf("Phase %s waits for approval: set spec.approve: %s in a pull request.", ph.Name, ph.Name)
		default:
			return fmt.Sprintf("Phase %s is %s: %s.", ph.Name, ph.State, ph.Reason)
		}
	}
	return "Every phase succeeded."
}

// Settings lists the plan's effective settings, one per line, with the
// defaults applied, so that a reader sees what a default chose.
func Settings(p *v1alpha1.MigrationPlan) []string {
	s := p.Spec
	t := s.Target
	id := fmt.Sprintf("identity: Secret %s, cloud %s", t.Identity.SecretName, t.Identity.CloudName)
	if f := t.Identity.From; f != nil {
		id += fmt.Sprintf(", copied from Secret %s/%s (clouds.yaml from key %s", f.Namespace, f.Name, f.CloudsKey)
		if f.CACertKey != "" {
			id += ", cacert from key " + f.CACertKey
		}
		id += ")"
	}
	lines := []string{
		fmt.Sprintf("cluster: %s/%s", s.Cluster.Namespace, s.Cluster.Name),
		id,
		"network: " + resource(&t.Network),
	}
	if t.ExternalNetwork != nil {
		lines = append(lines, "externalNetwork: "+resource(t.ExternalNetwork))
	}
	lines = append(lines,
		"failureDomain: "+t.FailureDomain,
		fmt.Sprintf("apiServer: loadBalancer=%t floatingIP=%t fixedIP=%q", *t.APIServer.LoadBalancer, *t.APIServer.FloatingIP, t.APIServer.FixedIP),
		"cni: "+t.CNI,
		fmt.Sprintf("controlPlane: %s %s", t.ControlPlane.Provider, t.ControlPlane.Name),
	)
	if k := t.ControlPlane.Kubelet; k != nil {
		lines = append(lines, "kubelet.preferredAddressTypes: "+strings.Join(k.PreferredAddressTypes, ", "))
	}
	for _, w := range t.Workers {
		lines = append(lines, fmt.Sprintf("workers %s: %d x %s, image %s, failureDomain %s", w.Name, w.Replicas, w.Flavor, w.Image, w.FailureDomain))
	}
	if r := s.Replace; r != nil && r.Gateway != nil {
		g := r.Gateway
		lines = append(lines, fmt.Sprintf("gateway: OpenStackServer %s (%s, image %s)", g.ServerName(), g.Flavor, g.Image))
	}
	timeouts := "timeouts: wait " + s.Timeouts.Wait
	if s.Cutover != nil {
		timeouts += ", drain " + s.Cutover.DrainTimeout
	}
	lines = append(lines, timeouts, "phases: "+strings.Join(p.Phases(), ", "))
	return lines
}

// renderInventory lists what cleanup removes and leaves, once approved.
func renderInventory(b *strings.Builder, items []InventoryItem) {
	if len(items) == 0 {
		return
	}
	b.WriteString("\nInventory of cleanup:\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	for _, it := range items {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", it.State, it.Resource, it.Reason)
	}
	tw.Flush()
}
