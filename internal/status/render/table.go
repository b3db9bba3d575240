// The phase table `reconciler status` prints, and a phase in one line
// for logs.

package render

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/ferry-dev/ferry/internal/status"
)

// Table writes a plan's phase table: a header line, one row per phase
// (phase, state, steps done/left, current step, its attempts and last
// error, who approved), then the reasons of phases that are not plain
// Pending or Succeeded, and why the plan stopped. `reconciler status`
// prints it; PR comments use Markdown.
func Table(w io.Writer, st *status.PlanStatus) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "Plan %s\n\n", header(st))
	fmt.Fprintln(tw, "PHASE\tSTATE\tDONE/LEFT\tCURRENT STEP\tATTEMPTS\tLAST ERROR\tAPPROVED BY")
	for i := range st.Phases {
		ph := &st.Phases[i]
		cur, attempts, lastErr := "-", "-", "-"
		if s := currentStep(ph); s != nil {
			cur = clip(s.Title(), tableCellMax)
			if s.Attempts > 0 {
				attempts = strconv.Itoa(s.Attempts)
			}
			if s.LastError != "" {
				lastErr = clip(s.LastError, tableCellMax)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\n",
			ph.Name, ph.State, ph.Done, ph.Left, cur, attempts, lastErr, orDash(approver(st, ph.Name)))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("render status of %s: %w", st.Plan, err)
	}
	var b strings.Builder
	for _, ph := range st.Phases {
		if explained(ph) {
			fmt.Fprintf(&b, "  %s (%s): %s\n", ph.Name, ph.State, oneLine(ph.Reason))
		}
	}
	if b.Len() > 0 {
		fmt.Fprintf(w, "\nReasons:\n%s", b.String())
	}
	tableInventory(w, st.Inventory)
	if st.Stopped != "" {
		fmt.Fprintf(w, "\nStopped: %s\n", oneLine(st.Stopped))
	}
	if st.Unobserved != "" {
		fmt.Fprintf(w, "\nNot observed (nothing runs until the live state can be read): %s\n", oneLine(st.Unobserved))
	}
	if len(st.Invalid) > 0 {
		fmt.Fprintf(w, "\nInvalid plan file (nothing runs until a commit fixes it):\n")
		for _, p := range st.Invalid {
			fmt.Fprintf(w, "  %s\n", oneLine(p))
		}
	}
	return nil
}

// PhaseLine is one phase in one line, for logs and `status --watch` away
// from a terminal: plan, phase, state, steps done/left, and the current
// step with its attempts and last error.
func PhaseLine(st *status.PlanStatus, ph *status.PhaseStatus) string {
	line := fmt.Sprintf("%s %s %s %d/%d", st.Plan, ph.Name, ph.State, ph.Done, ph.Left)
	if s := currentStep(ph); s != nil {
		line += ": " + s.Title()
		if s.Attempts > 1 {
			line += fmt.Sprintf(" (attempt %d)", s.Attempts)
		}
		if s.LastError != "" {
			line += ": " + clip(oneLine(s.LastError), tableCellMax)
		}
	}
	if explained(*ph) && ph.Reason != "" {
		line += " (" + clip(oneLine(ph.Reason), tableCellMax) + ")"
	}
	return line
}

// tableInventory writes the inventory for `reconciler status`.
func tableInventory(w io.Writer, items []status.InventoryItem) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintf(w, "\nInventory of cleanup:\n")
	for _, it := range items {
		fmt.Fprintf(w, "  %s: %s (%s)\n", it.State, oneLine(it.Resource), oneLine(it.Reason))
	}
}
