package status

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// MaxCommentLength is GitHub's limit on the body of an issue or pull
// request comment, in characters. Markdown measures in bytes, which is
// never fewer, so a body within it in bytes is within it in characters.
const MaxCommentLength = 65536

// Caps on one cell, in characters: a status shows where things stand, the
// YAML file and the step list keep the full text.
const (
	tableCellMax = 70
	mdCellMax    = 300
	mdReasonMax  = 1000
)

// Table writes a plan's phase table: a header line, one row per phase
// (phase, state, steps done/left, current step, its attempts and last
// error, who approved), then the reasons of phases that are not plain
// Pending or Succeeded, and why the plan stopped. `reconciler status`
// prints it; PR comments use Markdown.
func Table(w io.Writer, st *PlanStatus) error {
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
func PhaseLine(st *PlanStatus, ph *PhaseStatus) string {
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

// Markdown renders a plan's status for its pull-request comment: the phase
// table, the reasons, and every step with its result. The result is never
// longer than limit bytes (MaxCommentLength when limit <= 0): when it would
// be, the step list is cut and ends with "… N more steps; full status:
// <link>". link is where the full status is (the status file on the status
// branch); empty names the file.
func Markdown(st *PlanStatus, limit int, link string) string {
	if limit <= 0 {
		limit = MaxCommentLength
	}
	if link == "" {
		link = "`status/" + st.Plan + ".yaml`"
	}
	return fitSteps(mdHead(st), mdStepRows(st), limit, link)
}

// mdHead is what a comment always shows, above the step list: the title
// and header line, why nothing runs (stopped, not observed, an invalid
// file), the phase table and the phases' reasons.
func mdHead(st *PlanStatus) string {
	var head strings.Builder
	fmt.Fprintf(&head, "### ferry: plan `%s`\n\n%s\n\n", mdCode(st.Plan), mdText(header(st), mdReasonMax))
	if st.Stopped != "" {
		fmt.Fprintf(&head, "> **Stopped:** %s\n\n", mdText(st.Stopped, mdReasonMax))
	}
	if st.Unobserved != "" {
		fmt.Fprintf(&head, "> **Not observed:** nothing runs until the live state can be read: %s\n\n", mdText(st.Unobserved, mdReasonMax))
	}
	if len(st.Invalid) > 0 {
		head.WriteString("> **Invalid plan file:** nothing runs until a commit fixes it.\n>\n")
		for _, p := range st.Invalid {
			fmt.Fprintf(&head, "> - %s\n", mdText(p, mdReasonMax))
		}
		head.WriteString("\n")
	}
	mdPhases(&head, st)
	mdInventory(&head, st.Inventory)
	return head.String()
}

// mdPhases writes the phase table, Failed and Blocked in bold, and then
// the reasons of the phases that need one.
func mdPhases(head *strings.Builder, st *PlanStatus) {
	head.WriteString("| Phase | State | Done/left | Current step | Attempts | Last error | Approved by |\n")
	head.WriteString("| --- | --- | --- | --- | --- | --- | --- |\n")
	for i := range st.Phases {
		ph := &st.Phases[i]
		var cur, attempts, lastErr string
		if s := currentStep(ph); s != nil {
			cur = mdText(s.Title(), mdCellMax)
			if s.Attempts > 0 {
				attempts = strconv.Itoa(s.Attempts)
			}
			lastErr = mdText(s.LastError, mdCellMax)
		}
		state := ph.State.Text()
		if ph.State == PhaseFailed || ph.State == PhaseBlocked {
			state = "**" + state + "**"
		}
		fmt.Fprintf(head, "| %s | %s | %d/%d | %s | %s | %s | %s |\n",
			mdText(ph.Name, mdCellMax), state, ph.Done, ph.Left, cur, attempts, lastErr, mdText(approver(st, ph.Name), mdCellMax))
	}
	head.WriteString("\n")
	reasons := false
	for _, ph := range st.Phases {
		if explained(ph) {
			fmt.Fprintf(head, "- **%s** (%s): %s\n", mdText(ph.Name, mdCellMax), ph.State.Text(), mdText(ph.Reason, mdReasonMax))
			reasons = true
		}
	}
	if reasons {
		head.WriteString("\n")
	}
}

// mdStepRows are the rows of the step list, every phase's steps in order,
// each with its result: the message, or the last error of a step that has
// not succeeded.
func mdStepRows(st *PlanStatus) []string {
	var rows []string
	for _, ph := range st.Phases {
		for _, s := range ph.Steps {
			attempts, took := "", ""
			if s.Attempts > 0 {
				attempts = strconv.Itoa(s.Attempts)
			}
			if s.Duration > 0 {
				took = time.Duration(s.Duration).String()
			}
			result := s.Message
			if s.State != StepSucceeded && s.LastError != "" {
				result = s.LastError
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s |\n",
				mdText(ph.Name, mdCellMax), mdText(s.Title(), mdCellMax),
				s.State, attempts, took, mdText(result, mdCellMax)))
		}
	}
	return rows
}

// fitSteps appends the step list to head, cutting it to fit limit bytes
// with a last line that says how many steps were left out and links to
// the full status; a head too long on its own is cut too.
func fitSteps(head string, rows []string, limit int, link string) string {
	const stepsHead = "#### Steps\n\n| Phase | Step | State | Attempts | Duration | Result |\n| --- | --- | --- | --- | --- | --- |\n"
	more := func(n int) string { return fmt.Sprintf("\n… %d more steps; full status: %s\n", n, link) }

	out := head
	if len(rows) == 0 {
		if len(out) <= limit {
			return out
		}
		return cutWith(out, limit, "\n… full status: "+link+"\n")
	}
	total := len(out) + len(stepsHead)
	for _, r := range rows {
		total += len(r)
	}
	if total <= limit {
		return out + stepsHead + strings.Join(rows, "")
	}
	// Keep as many rows as fit with the line that says how many are left.
	n, size := 0, len(out)+len(stepsHead)
	for n < len(rows) && size+len(rows[n])+len(more(len(rows)-n-1)) <= limit {
		size += len(rows[n])
		n++
	}
	if n == 0 {
		return cutWith(out, limit, more(len(rows)))
	}
	return out + stepsHead + strings.Join(rows[:n], "") + more(len(rows)-n)
}

// cutWith cuts s so that s and tail fit in limit bytes together. Only a
// limit far below a real comment's, or a status with a huge header, gets
// here.
func cutWith(s string, limit int, tail string) string {
	if len(tail) > limit {
		return cutBytes(tail, limit)
	}
	return cutBytes(s, limit-len(tail)) + tail
}

// cutBytes cuts s to at most n bytes without splitting a character.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// header is the line that names the plan and where it stands.
func header(st *PlanStatus) string {
	var b strings.Builder
	b.WriteString(st.Plan)
	if st.Revision != "" {
		b.WriteString(" at revision " + shortRev(st.Revision))
	}
	approve := st.Approve
	if approve == "" {
		approve = "nothing"
	}
	b.WriteString(": approve " + approve)
	if st.Approved != "" {
		b.WriteString(", acted on up to " + st.Approved)
	}
	if st.Rollback != "" {
		b.WriteString(", rolling back to " + st.Rollback)
		if by := approver(st, RollbackApproval(st.Rollback)); by != "" {
			b.WriteString(" (approved by " + by + ")")
		}
	}
	if !st.UpdatedAt.IsZero() {
		b.WriteString(", updated " + st.UpdatedAt.UTC().Format(time.RFC3339))
	}
	return b.String()
}

// currentStep is the step a person wants to see for a phase: the one that
// failed, else the one in flight, else the next one to run when the phase
// is approved; nil for a phase that is done or waits for its approval.
func currentStep(ph *PhaseStatus) *StepStatus {
	if s := firstFailed(ph); s != nil {
		return s
	}
	for i := range ph.Steps {
		if ph.Steps[i].State.inFlight() {
			return &ph.Steps[i]
		}
	}
	if ph.State == PhasePending {
		return nil
	}
	for i := range ph.Steps {
		if ph.Steps[i].State == StepPending {
			return &ph.Steps[i]
		}
	}
	return nil
}

// explained reports whether a phase's reason is worth a line: Pending
// phases all say "not approved", Succeeded ones need none.
func explained(ph PhaseStatus) bool {
	return ph.Reason != "" && ph.State != PhasePending && ph.State != PhaseSucceeded
}

func approver(st *PlanStatus, phase string) string {
	for _, a := range st.ApprovedBy {
		if a.Phase == phase {
			return a.String()
		}
	}
	return ""
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine folds a multi-line message into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// clip shortens s to max characters, on one line, marking the cut.
func clip(s string, max int) string {
	s = oneLine(s)
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}

// mdText makes text safe inside a Markdown table cell or line: one line,
// clipped, and with the characters that would start markup, HTML or a new
// cell escaped, so that an error message cannot reshape the comment.
func mdText(s string, max int) string {
	return mdEscaper.Replace(clip(s, max))
}

var mdEscaper = strings.NewReplacer(
	`\`, `\\`, "`", "\\`", `*`, `\*`, `_`, `\_`, `[`, `\[`, `]`, `\]`,
	`<`, `&lt;`, `>`, `&gt;`, `|`, `\|`, `~`, `\~`,
)

// mdCode makes text safe inside a code span.
func mdCode(s string) string {
	return strings.ReplaceAll(oneLine(s), "`", "'")
}
