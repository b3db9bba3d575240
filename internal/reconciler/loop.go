// Package reconciler is ferry's loop: on each new revision of the plans
// repository and each step result it observes every plan's clusters and
// cloud, plans, publishes the next runnable group of steps, and records the
// status. It is level-triggered: what woke it does not matter; each cycle
// looks at everything again.
package reconciler

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/planfile"
	"github.com/ferry-dev/ferry/internal/planner"
)

// Source is the plans repository.
type Source interface {
	// Poll returns the tracked branch's head, fetching it when it moved.
	Poll(ctx context.Context) (revision string, changed bool, err error)
	// FS is the repository's tree at a revision.
	FS(revision string) (fs.FS, error)
}

// Observer reads the state a plan is planned against.
type Observer interface {
	Observe(ctx context.Context, p *v1alpha1.MigrationPlan, record observed.Record) (*observed.Snapshot, error)
}

// Publisher publishes steps.
type Publisher interface {
	PublishStep(ctx context.Context, ev *events.StepEvent) (duplicate bool, err error)
}

// Recorder keeps what the loop learns about each plan: where it stands
// after each cycle, and each result. It is where status commits and pull
// request comments come from.
type Recorder interface {
	// Planned records a plan's state after a cycle; file is its path in
	// the repository and published lists the steps published in this cycle.
	Planned(ctx context.Context, cycle Cycle, file, plan string, res *planner.Result, published []planner.Step)
	// Invalid records a plan file that failed validation; plan is the
	// plan the file held at an earlier revision, or "" for a file that was
	// never valid. Nothing of that plan runs until the file is fixed.
	Invalid(ctx context.Context, cycle Cycle, file, plan string, problems planfile.Errors)
	// Unobserved records a plan whose live state could not be read this
	// cycle (an API server down, RBAC missing): nothing of it runs until
	// a cycle reads it.
	Unobserved(ctx context.Context, cycle Cycle, file, plan string, err error)
	// Removed records a plan whose file left the branch: its migration
	// stops before its next step, and nothing is rolled back.
	Removed(ctx context.Context, cycle Cycle, plan string)
	// Result records a step's result.
	Result(ctx context.Context, ev *events.ResultEvent)
	// Flush writes what the cycle recorded (one status commit for all
	// plans, comment updates).
	Flush(ctx context.Context, cycle Cycle) error
}

// Cycle identifies one pass of the loop.
type Cycle struct {
	Revision string
	At       time.Time
}

// Loop is the reconciler. Its exported fields are set before Run.
type Loop struct {
	Source    Source
	Observer  Observer
	Publisher Publisher
	Recorder  Recorder
	// Path is the plans directory in the repository. Default "plans".
	Path string
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// AfterCycle, when set, is told how each cycle went (metrics, readiness).
	AfterCycle func(err error)
	// Latency, when set, is told how long each step took from its
	// publication to its final result (metrics).
	Latency func(ev *events.ResultEvent, d time.Duration)
	// Previews, when set, keeps the preview comments of open pull requests
	// up to date after each cycle.
	Previews *Previews
	// Parallel is how many plans a cycle reconciles at once. Default 8.
	Parallel int
	// Resync is how often a plan at rest (nothing to run or in flight) is
	// observed again although nothing told the loop of a change. Default
	// 10m.
	Resync time.Duration
	// StatusEvery is the least time between two status commits of Run.
	// Default 1s.
	StatusEvery time.Duration
	// StaleAfter is how long a published step may go without a final
	// result before the loop stops waiting for it; the planner then
	// decides again from the observed state. Default 1h.
	StaleAfter time.Duration
	// Timeout bounds each remote stage of a pass (the poll, the
	// previews), each plan's reconcile and each status write: a call that
	// hangs fails, and the next cycle tries again. Default 2m.
	Timeout time.Duration
	Log     *slog.Logger

	// wake asks Run for a cycle that polls the repository now.
	wake chan struct{}
	// queue holds the plans Run's workers reconcile next: one at a time
	// per plan, each as soon as a worker is free.
	queue  workqueue.TypedInterface[string]
	mu     sync.Mutex
	loaded *loadedRevision
	// plans holds, per plan name, what the loop remembers between cycles.
	plans map[string]*planState
	// progress is where the loop is, for the watchdog; guarded by mu.
	progress progress
}

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
)

// planState is the loop's memory of one plan.
type planState struct {
	// inFlight are the IDs of published steps without a final result, and
	// when they were published; no new group is published while any is
	// left, unless it is older than StaleAfter (its result was lost).
	inFlight map[string]time.Time
	// failed are the keys of steps that failed for good at revision
	// failedAt; they are not published again until the revision changes.
	failed   map[string]bool
	failedAt string
	// succeeded are the IDs of steps whose success was reported, and
	// when: the informers the observer reads may not show a step's effect
	// yet, and such a step is not published again (see cacheLag).
	succeeded map[string]time.Time
	// record is fed back to the planner: the furthest phase acted on and
	// the one-shot checks that passed.
	record observed.Record
	// present is false once the plan's file left the branch.
	present bool
	// file is the plan's path in the repository when last valid.
	file string
	// settled is true when the last observation (at observedAt, of
	// revision rev) left nothing to run, in flight or blocked; dirty when
	// something may have changed since (a result, an informer event about
	// cluster in one of namespaces, the namespaces the plan reads).
	settled    bool
	dirty      bool
	rev        string
	observedAt time.Time
	namespaces []string
	cluster    string
}

// loadedRevision is the plan files of the last revision loaded.
type loadedRevision struct {
	rev      string
	fsys     fs.FS
	files    []*planfile.File
	byName   map[string]*planfile.File
	problems planfile.Errors
}

// Restore seeds the loop's memory from recorded statuses (after a restart),
// before Run.
func (l *Loop) Restore(plan string, record observed.Record) {
	l.state(plan).record = record
}

func (l *Loop) state(plan string) *planState {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.plans == nil {
		l.plans = map[string]*planState{}
	}
	st, ok := l.plans[plan]
	if !ok {
		st = &planState{inFlight: map[string]time.Time{}, failed: map[string]bool{}, succeeded: map[string]time.Time{}}
		l.plans[plan] = st
	}
	return st
}

// Wake asks for a cycle soon that polls the repository; it never blocks.
// Webhooks call it.
func (l *Loop) Wake() {
	l.init()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *Loop) init() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wake == nil {
		l.wake, l.queue = make(chan struct{}, 1), workqueue.NewTyped[string]()
	}
	if l.Now == nil {
		l.Now = time.Now
	}
	if l.Log == nil {
		l.Log = slog.Default()
	}
	if l.Path == "" {
		l.Path = "plans"
	}
	if l.StaleAfter == 0 {
		l.StaleAfter = time.Hour
	}
	if l.Parallel == 0 {
		l.Parallel = 8
	}
	if l.Resync == 0 {
		l.Resync = 10 * time.Minute
	}
	if l.StatusEvery == 0 {
		l.StatusEvery = time.Second
	}
	if l.Timeout == 0 {
		l.Timeout = 2 * time.Minute
	}
	if l.progress.plans == nil {
		l.progress = progress{stage: stageIdle, plans: map[string]time.Time{}}
	}
}

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

// Run polls the repository every interval and on every Wake, and has
// Parallel workers reconcile each plan that may have changed as soon as
// one is free: after a new revision, a result of one of its steps, an
// informer event about its cluster, or Resync. Plans never wait for each
// other. A failed cycle or plan is logged and tried again. Statuses are
// written in the background, one commit at a time, at most one per
// StatusEvery, so that a slow push never holds a plan's next step back.
func (l *Loop) Run(ctx context.Context, interval time.Duration) error {
	l.init()
	l.mu.Lock()
	now := time.Now()
	l.progress.running, l.progress.started, l.progress.lastPass = true, now, time.Time{}
	l.progress.stage, l.progress.stageSince = stageIdle, now
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.progress.running = false
		l.mu.Unlock()
	}()
	t := time.NewTicker(interval)
	defer t.Stop()
	flushes := make(chan Cycle, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer l.queue.ShutDown()
	if l.Recorder != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.flushLoop(ctx, flushes)
		}()
	}
	for range l.Parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.work(ctx, flushes)
		}()
	}
	for {
		began := time.Now()
		cycle, files, err := l.pass(ctx)
		l.passDone()
		for _, f := range files {
			l.queue.Add(f.Plan.Metadata.Name)
		}
		l.Log.Debug("cycle done", "plans", len(files), "took", time.Since(began).Round(time.Millisecond), "error", err)
		if err != nil && ctx.Err() == nil {
			l.Log.Error("cycle failed; retrying at the next one", "error", err)
		}
		if l.AfterCycle != nil && ctx.Err() == nil {
			l.AfterCycle(err)
		}
		if l.Recorder != nil && cycle.Revision != "" {
			requestFlush(flushes, cycle)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-l.wake:
		}
	}
}

// requestFlush asks the flusher to write, unless a request is pending:
// one write takes all that is recorded.
func requestFlush(flushes chan<- Cycle, cycle Cycle) {
	select {
	case flushes <- cycle:
	default:
	}
}

// work reconciles the plans of the queue until it shuts down.
func (l *Loop) work(ctx context.Context, flushes chan<- Cycle) {
	for {
		name, shutdown := l.queue.Get()
		if shutdown {
			return
		}
		if cycle, ok := l.reconcileQueued(ctx, name); ok && l.Recorder != nil {
			requestFlush(flushes, cycle)
		}
		l.queue.Done(name)
	}
}

// reconcileQueued reconciles a plan at the revision last loaded, unless
// it is at rest, or has no valid file there (the cycles record that).
func (l *Loop) reconcileQueued(ctx context.Context, name string) (Cycle, bool) {
	l.mu.Lock()
	loaded := l.loaded
	l.mu.Unlock()
	if loaded == nil {
		return Cycle{}, false
	}
	f := loaded.byName[name]
	if f == nil {
		return Cycle{}, false
	}
	cycle := Cycle{Revision: loaded.rev, At: l.Now().UTC()}
	if l.settled(name, cycle) {
		return Cycle{}, false
	}
	log := l.Log.With("revision", short(cycle.Revision), "plan", name)
	ctx = observed.WithRepo(ctx, loaded.fsys)
	l.mu.Lock()
	l.progress.plans[name] = time.Now()
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.progress.plans, name)
		l.mu.Unlock()
	}()
	if err := l.reconcile(ctx, cycle, f.Path, f.Plan, log); err != nil && ctx.Err() == nil {
		log.Error("plan not reconciled; trying again at its next change or cycle", "error", err)
	}
	return cycle, true
}

// flushLoop writes what the cycles recorded, as Run's cycles ask, until
// ctx ends; a failed write is logged, and the next request writes it.
func (l *Loop) flushLoop(ctx context.Context, requests <-chan Cycle) {
	var last time.Time
	failures := 0
	for {
		var cycle Cycle
		select {
		case <-ctx.Done():
			return
		case cycle = <-requests:
		}
		if wait := flushWait(l.StatusEvery, failures) - time.Since(last); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		last = time.Now()
		l.mu.Lock()
		l.progress.flushSince = last
		l.mu.Unlock()
		if err := l.flush(ctx, cycle); err != nil && ctx.Err() == nil {
			failures++
			l.Log.Error("status not recorded; retrying", "error", err, "retry_in", flushWait(l.StatusEvery, failures))
		} else {
			failures = 0
		}
		l.mu.Lock()
		l.progress.flushSince = time.Time{}
		l.mu.Unlock()
	}
}

// flushWait is the least time between two status writes after failures
// failed in a row: every, doubled per failure up to a minute, so that a Git
// remote that is down is not asked (and the log not written) every second.
func flushWait(every time.Duration, failures int) time.Duration {
	if failures == 0 {
		return every
	}
	return min(every<<min(failures, 16), max(every, time.Minute))
}

// flush writes what the cycles recorded, within Timeout.
func (l *Loop) flush(ctx context.Context, cycle Cycle) error {
	ctx, cancel := context.WithTimeout(ctx, l.Timeout)
	defer cancel()
	return l.Recorder.Flush(ctx, cycle)
}

// OnResult takes a step result: the step is no longer in flight, a passed
// probe is remembered, a final failure stops the step at its revision. It
// wakes the loop.
func (l *Loop) OnResult(ctx context.Context, ev *events.ResultEvent) error {
	l.init()
	st := l.state(ev.Plan)
	l.mu.Lock()
	st.dirty = true
	if published, ok := st.inFlight[ev.StepID]; ok && ev.Outcome != events.Retrying && l.Latency != nil {
		defer l.Latency(ev, l.Now().Sub(published))
	}
	switch ev.Outcome {
	case events.Succeeded:
		delete(st.inFlight, ev.StepID)
		st.succeeded[ev.StepID] = l.Now()
		if isCheck(ev.StepKey) && !slices.Contains(st.record.Checks, ev.StepKey) {
			st.record.Checks = append(st.record.Checks, ev.StepKey)
			sort.Strings(st.record.Checks)
		}
	case events.Failed:
		delete(st.inFlight, ev.StepID)
		if st.failedAt != ev.Revision {
			st.failed, st.failedAt = map[string]bool{}, ev.Revision
		}
		st.failed[ev.StepKey] = true
	}
	l.mu.Unlock()
	if f, ok := l.Observer.(interface{ Forget(plan, executor string) }); ok && ev.Outcome != events.Retrying {
		// The step may have changed what the observer caches (the cloud,
		// the workload cluster): the next cycle must see its effect.
		f.Forget(ev.Plan, ev.Executor)
	}
	if l.Recorder != nil {
		l.Recorder.Result(ctx, ev)
	}
	l.queue.Add(ev.Plan)
	return nil
}

// isCheck reports whether a step key is a one-shot check whose passing
// leaves nothing to observe (the planner asks the record for it).
func isCheck(key string) bool { return strings.Contains(key, "/probe/") }

// Cycle polls the repository, reconciles every plan at the branch's head
// that is not at rest, and writes the statuses; it returns when all is
// done (Run does the same work with its workers).
func (l *Loop) Cycle(ctx context.Context) error {
	l.init()
	cycle, files, err := l.pass(ctx)
	l.passDone()
	l.mu.Lock()
	if l.loaded != nil {
		ctx = observed.WithRepo(ctx, l.loaded.fsys)
	}
	l.mu.Unlock()
	errs := []error{err}
	var errMu sync.Mutex
	work := make(chan *planfile.File)
	var wg sync.WaitGroup
	for range min(l.Parallel, max(len(files), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				name := f.Plan.Metadata.Name
				if err := l.reconcile(ctx, cycle, f.Path, f.Plan, l.Log.With("revision", short(cycle.Revision), "plan", name)); err != nil {
					errMu.Lock()
					errs = append(errs, fmt.Errorf("plan %s: %w", name, err))
					errMu.Unlock()
				}
			}
		}()
	}
	for _, f := range files {
		work <- f
	}
	close(work)
	wg.Wait()
	if l.Recorder != nil && cycle.Revision != "" {
		if err := l.flush(ctx, cycle); err != nil {
			errs = append(errs, fmt.Errorf("record status: %w", err))
		}
	}
	return errors.Join(errs...)
}

// pass polls the repository and loads the branch's head, records invalid
// and removed plan files, updates previews, and returns the plans to
// reconcile: those not at rest.
func (l *Loop) pass(ctx context.Context) (Cycle, []*planfile.File, error) {
	l.enter(stagePoll)
	pollCtx, cancel := context.WithTimeout(ctx, l.Timeout)
	rev, _, err := l.Source.Poll(pollCtx)
	cancel()
	if err != nil {
		return Cycle{}, nil, fmt.Errorf("poll plans repository: %w", err)
	}
	cycle := Cycle{Revision: rev, At: l.Now().UTC()}
	l.enter(stageLoad)
	files, problems, err := l.load(rev)
	if err != nil {
		return Cycle{}, nil, err
	}
	log := l.Log.With("revision", short(rev))
	seen := map[string]bool{}
	invalid := byFile(problems)
	for _, file := range slices.Sorted(maps.Keys(invalid)) {
		// A plan whose file broke is not removed: it waits for the fix.
		plan := l.planOf(file)
		if plan != "" {
			seen[plan] = true
		}
		log.Warn("invalid plan file: its plan waits for a fix; the other plans go on", "file", file, "plan", plan, "problems", len(invalid[file]))
		if l.Recorder != nil {
			l.Recorder.Invalid(ctx, cycle, file, plan, invalid[file])
		}
	}
	var todo []*planfile.File
	for _, f := range files {
		seen[f.Plan.Metadata.Name] = true
		if !l.settled(f.Plan.Metadata.Name, cycle) {
			todo = append(todo, f)
		}
	}
	l.mu.Lock()
	var removed []string
	for name, st := range l.plans {
		if st.present && !seen[name] {
			st.present = false
			removed = append(removed, name)
		}
	}
	l.mu.Unlock()
	sort.Strings(removed)
	for _, name := range removed {
		log.Warn("plan file removed from the branch: its migration stops; nothing is rolled back", "plan", name)
		if l.Recorder != nil {
			l.Recorder.Removed(ctx, cycle, name)
		}
	}
	if l.Previews != nil {
		l.enter(stagePreviews)
		previewCtx, cancel := context.WithTimeout(ctx, l.Timeout)
		defer cancel()
		if err := l.Previews.Update(previewCtx, l.record); err != nil {
			return cycle, todo, err
		}
	}
	return cycle, todo, nil
}

// load decodes the plan files at rev, or returns those of the last cycle
// when rev is the same: an idle repository is not parsed again.
func (l *Loop) load(rev string) ([]*planfile.File, planfile.Errors, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.loaded != nil && l.loaded.rev == rev {
		return l.loaded.files, l.loaded.problems, nil
	}
	fsys, err := l.Source.FS(rev)
	if err != nil {
		return nil, nil, fmt.Errorf("read revision %s: %w", short(rev), err)
	}
	files, err := planfile.LoadFS(fsys, l.Path)
	var problems planfile.Errors
	if err != nil && !errors.As(err, &problems) {
		return nil, nil, fmt.Errorf("load plans at %s: %w", short(rev), err)
	}
	byName := make(map[string]*planfile.File, len(files))
	for _, f := range files {
		byName[f.Plan.Metadata.Name] = f
	}
	l.loaded = &loadedRevision{rev: rev, fsys: fsys, files: files, byName: byName, problems: problems}
	return files, problems, nil
}

// settled reports whether a plan may be skipped this cycle: at its last
// observation it had nothing to run, nothing in flight and nothing
// blocked, and since then the revision did not change, no result came, no
// informer saw a change in its namespaces, and Resync did not pass. The
// workload clusters and the cloud have no informers: Resync bounds how
// late a change there is seen for a plan at rest.
func (l *Loop) settled(plan string, cycle Cycle) bool {
	st := l.state(plan)
	l.mu.Lock()
	defer l.mu.Unlock()
	return st.settled && !st.dirty && st.rev == cycle.Revision && cycle.At.Sub(st.observedAt) < l.Resync
}

// Changed marks for observation the plans of cluster that read namespace
// (their cluster's, or one they copy Secrets from), or all plans that read
// namespace when cluster is "" (unknown), and queues them for Run's
// workers. The management cluster's informers call it.
func (l *Loop) Changed(namespace, cluster string) {
	l.init()
	l.mu.Lock()
	var changed []string
	for name, st := range l.plans {
		if (cluster == "" || cluster == st.cluster) && slices.Contains(st.namespaces, namespace) {
			st.dirty = true
			changed = append(changed, name)
		}
	}
	l.mu.Unlock()
	for _, name := range changed {
		l.queue.Add(name)
	}
}

// planOf returns the plan whose file was file when last valid, or "".
func (l *Loop) planOf(file string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, st := range l.plans {
		if st.present && st.file == file {
			return name
		}
	}
	return ""
}

// record returns a copy of what the loop remembers of a plan for the
// planner.
func (l *Loop) record(plan string) observed.Record {
	st := l.state(plan)
	l.mu.Lock()
	defer l.mu.Unlock()
	return st.recordCopy()
}

// recordCopy is a copy of the record that the planner may keep. Callers
// hold l.mu.
func (st *planState) recordCopy() observed.Record {
	r := st.record
	r.Checks = slices.Clone(st.record.Checks)
	return r
}

// reconcile observes, plans and publishes one plan.
func (l *Loop) reconcile(ctx context.Context, cycle Cycle, file string, p *v1alpha1.MigrationPlan, log *slog.Logger) error {
	st := l.state(p.Metadata.Name)
	l.mu.Lock()
	st.present, st.file = true, file
	st.dirty, st.settled, st.rev, st.observedAt = false, false, cycle.Revision, cycle.At
	st.namespaces, st.cluster = planNamespaces(p), p.Spec.Cluster.Name
	record := st.recordCopy()
	for id, at := range st.succeeded {
		if cycle.At.Sub(at) > events.DuplicateWindow {
			delete(st.succeeded, id)
		}
	}
	for id, at := range st.inFlight {
		if cycle.At.Sub(at) > l.StaleAfter {
			log.Warn("no result for a published step; planning again from the observed state", "step_id", id, "published", at)
			delete(st.inFlight, id)
		}
	}
	busy := len(st.inFlight) > 0
	l.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, l.Timeout)
	defer cancel()
	snap, err := l.Observer.Observe(ctx, p, record)
	if err != nil {
		if l.Recorder != nil {
			l.Recorder.Unobserved(ctx, cycle, file, p.Metadata.Name, err)
		}
		return err
	}
	res, err := planner.Plan(p, snap)
	if err != nil {
		return err
	}
	var published []planner.Step
	next := res.Next()
	if next != nil && !busy {
		published, err = l.publish(ctx, cycle, p, res.Runnable, next, st, log)
	}
	l.mu.Lock()
	st.settled = next == nil && !busy && res.Stopped == "" && !blocked(res)
	l.mu.Unlock()
	if l.Recorder != nil {
		l.Recorder.Planned(ctx, cycle, file, p.Metadata.Name, res, published)
	}
	return err
}

// cacheLag is how long after a step's success the loop trusts the result
// over an observation that does not show its effect yet (informers lag
// behind the executor's write by milliseconds; a slow watch, by seconds).
const cacheLag = 30 * time.Second

// publish sends a group's steps, except those that failed for good at this
// revision (a person must act; a new commit retries them) and those that
// just succeeded (the observation lags behind).
func (l *Loop) publish(ctx context.Context, cycle Cycle, p *v1alpha1.MigrationPlan, phase string, g *planner.Group, st *planState, log *slog.Logger) ([]planner.Step, error) {
	var published []planner.Step
	for _, s := range g.Steps {
		l.mu.Lock()
		failed := st.failedAt == cycle.Revision && st.failed[s.Key]
		l.mu.Unlock()
		if failed {
			continue
		}
		ev := events.NewStepEvent(p, cycle.Revision, s, cycle.At)
		l.mu.Lock()
		doneAt, done := st.succeeded[ev.ID]
		l.mu.Unlock()
		if done && l.Now().Sub(doneAt) < cacheLag {
			continue // its effect is not observed yet; an informer event will wake the loop
		}
		log.Info("publishing step", "phase", s.Phase, "step", s.Key, "executor", s.Executor)
		// In flight before it is published: an executor may run it and
		// its result reach OnResult before PublishStep returns.
		l.mu.Lock()
		st.inFlight[ev.ID] = l.Now()
		l.mu.Unlock()
		duplicate, err := l.Publisher.PublishStep(ctx, ev)
		if err != nil {
			l.mu.Lock()
			delete(st.inFlight, ev.ID)
			l.mu.Unlock()
			return published, err
		}
		l.mu.Lock()
		if duplicate && done {
			// JetStream dropped it: no result will come.
			delete(st.inFlight, ev.ID)
			log.Warn("a step that succeeded is not observed done, and JetStream drops it as a duplicate until its window ends", "step", s.Key)
			l.mu.Unlock()
			continue
		}
		if p.PhaseIndex(phase) > p.PhaseIndex(st.record.Approved) {
			st.record.Approved = phase
		}
		l.mu.Unlock()
		published = append(published, s)
	}
	return published, nil
}

// blocked reports whether a phase of res waits on a health check or input.
func blocked(res *planner.Result) bool {
	for _, ph := range res.Phases {
		if ph.State == planner.Blocked {
			return true
		}
	}
	return false
}

// planNamespaces are the namespaces whose objects a plan's observation
// reads: its cluster's, and those its Secrets are copied from.
func planNamespaces(p *v1alpha1.MigrationPlan) []string {
	ns := []string{p.Spec.Cluster.Namespace}
	if a := p.Spec.Adopt; a != nil && a.SecretsFrom != "" {
		ns = append(ns, a.SecretsFrom)
	}
	if f := p.Spec.Target.Identity.From; f != nil {
		ns = append(ns, f.Namespace)
	}
	return ns
}

func byFile(problems planfile.Errors) map[string]planfile.Errors {
	out := map[string]planfile.Errors{}
	for _, e := range problems {
		out[e.File] = append(out[e.File], e)
	}
	return out
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}
