package reconciler

// Where the loop is, for the watchdog that fails /healthz when it is stuck.

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// progress is what the watchdog reads: the pass's stage and since when,
// when the last pass ended, and the plans and status write under way. The
// loop's goroutines tell it what they do; its zero value is a loop that
// does not run.
type progress struct {
	mu sync.Mutex
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

// start records that Run started, and stop that it returned.
func (p *progress) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	p.running, p.started, p.lastPass = true, now, time.Time{}
	p.stage, p.stageSince = stageIdle, now
}

func (p *progress) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running = false
}

// enter records that the pass entered stage.
func (p *progress) enter(stage string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stage, p.stageSince = stage, time.Now()
}

// passDone records the end of a pass, successful or not.
func (p *progress) passDone() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	p.stage, p.stageSince, p.lastPass = stageIdle, now, now
}

// reconciling records that a worker began to reconcile plan, and
// reconciled that it is done.
func (p *progress) reconciling(plan string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.plans == nil {
		p.plans = map[string]time.Time{}
	}
	p.plans[plan] = time.Now()
}

func (p *progress) reconciled(plan string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.plans, plan)
}

// flushing records that a status write began, and flushed that it ended.
func (p *progress) flushing() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flushSince = time.Now()
}

func (p *progress) flushed() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flushSince = time.Time{}
}

// LastPass returns when the last pass of Run ended (successful or not), or
// when Run started if none has.
func (l *Loop) LastPass() time.Time {
	l.progress.mu.Lock()
	defer l.progress.mu.Unlock()
	return l.progress.lastPassLocked()
}

func (p *progress) lastPassLocked() time.Time {
	if p.lastPass.IsZero() {
		return p.started
	}
	return p.lastPass
}

// Stalled returns an error that says where the loop is stuck when no pass
// ended within stallAfter, a pass stage, a plan's reconcile or a status
// write has run longer than that, and nil otherwise. Every remote call is
// bounded by Timeout, so a stall means a call that ignores its context or a
// wait that never ends: the process should be restarted (a Kubernetes
// liveness probe on /healthz does that).
func (l *Loop) Stalled(stallAfter time.Duration) error {
	p := &l.progress
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running {
		return nil
	}
	now, last := time.Now(), p.lastPassLocked()
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
