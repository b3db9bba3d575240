package reconciler

// Comment commands: `/ferry retry` and `/ferry preview`, written in a pull
// request's comments by an account with write access, answered once.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/status"
)

// The commands.
const (
	CommandRetry   = "retry"
	CommandPreview = "preview"
)

// commandPrefix starts a command: the first line of a comment.
const commandPrefix = "/ferry"

// answerKey is the comment key of ferry's answer to the command comment
// id: the answer is ferry's record that the command was carried out, so a
// command delivered twice, or read again after a restart, is answered and
// carried out once.
func answerKey(id int64) string { return fmt.Sprintf("command/%d", id) }

// Commands finds commands in the comments of the pull requests where they
// mean something, checks that their authors may give them, carries them
// out and answers each once:
//
//   - `/ferry retry` on a pull request that approved a phase republishes
//     the failed steps of the phases it approved (a new commit used to be
//     the only way);
//   - `/ferry preview` on an open pull request redoes its preview and its
//     merge gate.
//
// Only accounts with write access to the repository (asked of the forge)
// may; anyone else is answered why not. A command counts as answered only
// when ferry's own account (Forge.Login) wrote the answer. Comments are read by polling, at
// most once per Every per pull request, so a reconciler without webhooks
// finds them too; a webhook only wakes the loop sooner.
type Commands struct {
	Forge forge.Forge
	// Statuses are the plans' statuses: which pull request approved
	// which phases, and which failed.
	Statuses func() []*status.PlanStatus
	// Retry republishes the failed steps of plan's phases and returns
	// how many there were.
	Retry func(plan string, phases []string) int
	// Preview redoes the preview of pull request n; nil: none.
	Preview func(n int)
	// Open are the open pull requests that have a preview.
	Open func() []int
	// Every is the least time between two reads of one pull request's
	// comments. Default 10s.
	Every time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time

	read     map[int]time.Time // pull request -> when its comments were read
	answered map[int64]bool    // command comments answered by this process
}

// Update reads the comments of the pull requests that approved a failed
// phase and of the open ones with a preview, and carries out the commands
// not answered yet. It is called from the loop's goroutine only.
func (c *Commands) Update(ctx context.Context) error {
	if c.read == nil {
		c.read, c.answered = map[int]time.Time{}, map[int64]bool{}
	}
	if c.Every == 0 {
		c.Every = 10 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	approvedFailed := c.failedByPR()
	prs := slices.Collect(maps.Keys(approvedFailed))
	open := map[int]bool{}
	if c.Open != nil {
		for _, n := range c.Open() {
			open[n] = true
			if !slices.Contains(prs, n) {
				prs = append(prs, n)
			}
		}
	}
	slices.Sort(prs)
	var errs []error
	for _, n := range prs {
		if c.Now().Sub(c.read[n]) < c.Every {
			continue
		}
		if err := c.pullRequest(ctx, n, open[n]); err != nil {
			errs = append(errs, fmt.Errorf("commands of #%d: %w", n, err))
			continue
		}
		c.read[n] = c.Now()
	}
	for n := range c.read {
		if !slices.Contains(prs, n) {
			delete(c.read, n)
		}
	}
	return errors.Join(errs...)
}

// pullRequest carries out the commands in pull request n's comments that
// ferry has not answered.
func (c *Commands) pullRequest(ctx context.Context, n int, open bool) error {
	comments, err := c.Forge.PullRequestComments(ctx, n)
	if err != nil {
		return err
	}
	self, err := c.Forge.Login(ctx)
	if err != nil {
		return fmt.Errorf("ferry's login: %w", err)
	}
	for _, cm := range comments {
		// Anyone who may comment can write an answer's marker, to
		// silence a command someone else gave: only ferry's own answer
		// says a command was carried out.
		if !forge.SameLogin(cm.Author, self) {
			continue
		}
		if id, ok := answeredID(cm.Body); ok {
			c.answered[id] = true
		}
	}
	for _, cm := range comments {
		cmd, ok := parseCommand(cm.Body)
		if !ok || c.answered[cm.ID] || strings.Contains(cm.Body, "<!-- ferry:") {
			continue
		}
		answer, err := c.carryOut(ctx, n, open, cm, cmd)
		if err != nil {
			return err
		}
		body := forge.Comment(answerKey(cm.ID), "", fmt.Sprintf("@%s `%s %s`: %s\n", cm.Author, commandPrefix, strings.Join(cmd, " "), answer))
		if err := c.Forge.UpsertComment(ctx, n, answerKey(cm.ID), body); err != nil {
			return err
		}
		c.answered[cm.ID] = true
	}
	return nil
}

// carryOut checks the author's permission and carries out cmd (the words
// after /ferry) given in comment cm on pull request n; it returns the
// answer.
func (c *Commands) carryOut(ctx context.Context, n int, open bool, cm forge.IssueComment, cmd []string) (string, error) {
	log := logging.From(ctx).With("pr", n, "comment", cm.ID, "author", cm.Author, "command", strings.Join(cmd, " "))
	if len(cmd) == 0 || (cmd[0] != CommandRetry && cmd[0] != CommandPreview) || len(cmd) > 1 {
		return fmt.Sprintf("unknown command; ferry knows `%s %s` and `%s %s`", commandPrefix, CommandRetry, commandPrefix, CommandPreview), nil
	}
	perm, err := c.Forge.Permission(ctx, cm.Author)
	if err != nil {
		return "", fmt.Errorf("permission of %s: %w", cm.Author, err)
	}
	if perm != forge.PermissionWrite && perm != forge.PermissionAdmin {
		log.Warn("command refused: its author may not write to the repository", "permission", perm)
		return fmt.Sprintf("refused: commands need write access to the repository, and this account has %s access", perm), nil
	}
	switch cmd[0] {
	case CommandPreview:
		if !open || c.Preview == nil {
			return "nothing to preview: this pull request is not open, or changes no plan file", nil
		}
		c.Preview(n)
		log.Info("preview asked for")
		return "the preview and `" + GateContext + "` are being redone", nil
	}
	var done []string
	for plan, phases := range c.failedByPR()[n] {
		if count := c.Retry(plan, phases); count > 0 {
			done = append(done, fmt.Sprintf("%d failed step(s) of phase %s of plan %s", count, strings.Join(phases, ", "), plan))
		}
	}
	if len(done) == 0 {
		return "nothing to retry: no phase this pull request approved has a failed step", nil
	}
	slices.Sort(done)
	log.Info("retry asked for", "retrying", strings.Join(done, "; "))
	return "retrying " + strings.Join(done, "; ") + "; the progress comment follows them", nil
}

// failedByPR maps each pull request that approved a phase now Failed to
// those phases, by plan.
func (c *Commands) failedByPR() map[int]map[string][]string {
	out := map[int]map[string][]string{}
	if c.Statuses == nil {
		return out
	}
	for _, st := range c.Statuses() {
		for pr, phases := range approvedPhases(st) {
			for _, ph := range phases {
				if p := st.Phase(ph); p != nil && p.State == status.PhaseFailed {
					if out[pr] == nil {
						out[pr] = map[string][]string{}
					}
					out[pr][st.Plan] = append(out[pr][st.Plan], ph)
				}
			}
		}
	}
	return out
}

// approvedPhases maps the pull requests of st's approvals to the phases
// each approved: from the one after the previous approval's phase to its
// own.
func approvedPhases(st *status.PlanStatus) map[int][]string {
	out := map[int][]string{}
	next := 0
	for _, a := range st.ApprovedBy {
		end := slices.IndexFunc(st.Phases, func(p status.PhaseStatus) bool { return p.Name == a.Phase })
		if end < 0 {
			continue // a rollback's approval: it approved no phase to run
		}
		if a.PR > 0 {
			for _, p := range st.Phases[min(next, end) : end+1] {
				out[a.PR] = append(out[a.PR], p.Name)
			}
		}
		next = max(next, end+1)
	}
	return out
}

// parseCommand reads a command from a comment: its first line, "/ferry"
// and the words after it.
func parseCommand(body string) ([]string, bool) {
	first, _, _ := strings.Cut(strings.TrimSpace(body), "\n")
	fields := strings.Fields(first)
	if len(fields) == 0 || fields[0] != commandPrefix {
		return nil, false
	}
	return fields[1:], true
}

// answeredID reads the command comment ID from the marker of ferry's
// answer; the caller checks that ferry wrote body.
func answeredID(body string) (int64, bool) {
	var id int64
	i := strings.Index(body, "<!-- ferry:command/")
	if i < 0 {
		return 0, false
	}
	if _, err := fmt.Sscanf(body[i:], "<!-- ferry:command/%d -->", &id); err != nil {
		return 0, false
	}
	return id, true
}
