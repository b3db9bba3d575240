package reconciler

// Where the loop is, for the watchdog that fails /healthz when it is stuck.

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// progress is what the watchdog reads: the pass's stage and since when,
// when the last pass ended, and the plans and status write under way.
type progress struct {
	// running is true while Run runs: a replica that waits for the
	// leader election, or has lost it, is not stalled.
	running    bool
	started    time.Time
	stage      string
	stageSince time.Time
	lastPass   time.Time
	plans      map[string]time.Time
	flushSince time.Time
}

// Stages of a pass, as the watchdog names them.
const (
	stageIdle     = "waiting for the next cycle"
	stagePoll     = "polling the plans repository"
	stageLoad     = "loading the plan files"
	stagePreviews = "previewing pull requests"
	stageCommands = "reading comment commands"
)

// enter records that the pass entered stage.
func (l *Loop) enter(stage string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.progress.stage, l.progress.stageSince = stage, time.Now()
}

// passDone records the end of a pass, successful or not.
func (l *Loop) passDone() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	l.progress.stage, l.progress.stageSince, l.progress.lastPass = stageIdle, now, now
}

// LastPass returns when the last pass of Run ended (successful or not), or
// when Run started if none has.
func (l *Loop) LastPass() time.Time {
	l.init()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.progress.lastPass.IsZero() {
		return l.progress.started
	}
	return l.progress.lastPass
}

// Stalled returns an error that says where the loop is stuck when no pass
// ended within stallAfter, a pass stage, a plan's reconcile or a status
// write has run longer than that, and nil otherwise. Every remote call is
// bounded by Timeout, so a stall means a call that ignores its context or a
// wait that never ends: the process should be restarted (a Kubernetes
// liveness probe on /healthz does that).
func (l *Loop) Stalled(stallAfter time.Duration) error {
	last := l.LastPass()
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	p := &l.progress
	if !p.running {
		return nil
	}
	var problems []string
	if p.stage != stageIdle && now.Sub(p.stageSince) > stallAfter {
		problems = append(problems, fmt.Sprintf("stuck %s since %s (%s)", p.stage, stamp(p.stageSince), now.Sub(p.stageSince).Round(time.Second)))
	} else if now.Sub(last) > stallAfter {
		problems = append(problems, fmt.Sprintf("no pass ended since %s (%s); %s since %s", stamp(last), now.Sub(last).Round(time.Second), p.stage, stamp(p.stageSince)))
	}
	for _, plan := range slices.Sorted(maps.Keys(p.plans)) {
		if since := p.plans[plan]; now.Sub(since) > stallAfter {
			problems = append(problems, fmt.Sprintf("plan %s reconciling since %s (%s)", plan, stamp(since), now.Sub(since).Round(time.Second)))
		}
	}
	if !p.flushSince.IsZero() && now.Sub(p.flushSince) > stallAfter {
		problems = append(problems, fmt.Sprintf("status write running since %s (%s)", stamp(p.flushSince), now.Sub(p.flushSince).Round(time.Second)))
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("loop stalled (bound %s): %s", stallAfter, strings.Join(problems, "; "))
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
