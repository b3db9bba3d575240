// The pull-request comment: the phase table, the reasons and every step
// with its result, cut to the forge's size limit.

package render

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ferry-dev/ferry/internal/status"
)

// MaxCommentLength is GitHub's limit on the body of an issue or pull
// request comment, in characters. Markdown measures in bytes, which is
// never fewer, so a body within it in bytes is within it in characters.
const MaxCommentLength = 65536

// Markdown renders a plan's status for its pull-request comment: the phase
// table, the reasons, and every step with its result. The result is never
// longer than limit bytes (MaxCommentLength when limit <= 0): when it would
// be, the step list is cut and ends with "… N more steps; full status:
// <link>". link is where the full status is (the status file on the status
// branch); empty names the file.
func Markdown(st *status.PlanStatus, limit int, link string) string {
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
func mdHead(st *status.PlanStatus) string {
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
func mdPhases(head *strings.Builder, st *status.PlanStatus) {
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
		if ph.State == status.PhaseFailed || ph.State == status.PhaseBlocked {
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
func mdStepRows(st *status.PlanStatus) []string {
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
			if s.State != status.StepSucceeded && s.LastError != "" {
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

// mdInventory writes the inventory for the pull-request comment.
func mdInventory(head *strings.Builder, items []status.InventoryItem) {
	if len(items) == 0 {
		return
	}
	head.WriteString("**Inventory of cleanup** (what it removes and what it leaves of the old cloud and the move):\n\n")
	head.WriteString("| State | Resource | Why |\n| --- | --- | --- |\n")
	for _, it := range items {
		fmt.Fprintf(head, "| %s | %s | %s |\n", mdText(it.State, mdCellMax), mdText(it.Resource, mdCellMax), mdText(it.Reason, mdCellMax))
	}
	head.WriteString("\n")
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
