package reconciler

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/planfile"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/step"
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
	// Forget drops what the observer keeps about plan that a finished step
	// of the executor kind may have changed, so that the next observation
	// sees the step's effect.
	Forget(plan string, executor step.Kind)
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
	Planned(ctx context.Context, cycle Cycle, file, plan string, res *planner.Result, published []step.Step)
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
	// AfterFlush, when set, is told how each of Run's status writes went
	// (metrics: a status that keeps failing to be written is alerted on).
	AfterFlush func(err error)
	// Latency, when set, is told how long each step took from its
	// publication to its final result (metrics).
	Latency func(ev *events.ResultEvent, d time.Duration)
	// Verifier, when set, is asked before the loop acts on an approval
	// for the first time; an approval it refuses is not acted on.
	Verifier ApprovalVerifier
	// History, when set, keeps the last revision the loop acted on, and
	// the loop acts on no plan at a head that does not descend from it
	// until a person acknowledges that head (history.go). The Source must
	// then be an Ancestry.
	History HistoryStore
	// Commands, when set, carries out the commands in pull requests'
	// comments after each pass.
	Commands *Commands
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

	// wake asks Run for a cycle that polls the repository now.
	wake chan struct{}
	// queue holds the plans Run's workers reconcile next: one at a time
	// per plan, each as soon as a worker is free.
	queue workqueue.TypedInterface[string]
	// loaded is the last revision loaded: the pass stores it, the workers
	// reconcile its plans.
	loaded atomic.Pointer[loadedRevision]
	// mu guards init and plans, which holds, per plan name, what the loop
	// remembers between cycles.
	mu    sync.Mutex
	plans map[string]*planState
	// progress is where the loop is, for the watchdog.
	progress progress
	// history is the loop's side of History.
	history history
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
}

// Run polls the repository every interval and on every Wake, and has
// Parallel workers reconcile each plan that may have changed as soon as
// one is free: after a new revision, a result of one of its steps, an
// informer event about its cluster, or Resync. Plans never wait for each
// other. A failed cycle or plan is logged and tried again. Statuses are
// written in the background, one commit at a time, at most one per
// StatusEvery, so that a slow push never holds a plan's next step back.
func (l *Loop) Run(ctx context.Context, interval time.Duration) error {
	l.init()
	l.progress.start()
	defer l.progress.stop()
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
		l.progress.passDone()
		for _, f := range files {
			l.queue.Add(f.Plan.Metadata.Name)
		}
		logging.From(ctx).Debug("cycle done", "plans", len(files), "took", time.Since(began).Round(time.Millisecond), "error", err)
		if err != nil && ctx.Err() == nil {
			logging.From(ctx).Error("cycle failed; retrying at the next one", "error", err)
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
		cycle, ok, err := l.reconcileQueued(ctx, name)
		if err != nil && ctx.Err() == nil {
			logging.From(ctx).Error("plan not reconciled; trying again at its next change or cycle", "plan", name, "revision", short(cycle.Revision), "error", err)
		}
		if ok && l.Recorder != nil {
			requestFlush(flushes, cycle)
		}
		l.queue.Done(name)
	}
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
		l.progress.flushing()
		err := l.flush(ctx, cycle)
		if err != nil && ctx.Err() == nil {
			failures++
			logging.From(ctx).Error("status not recorded; retrying", "error", err, "retry_in", flushWait(l.StatusEvery, failures))
		} else {
			failures = 0
		}
		if l.AfterFlush != nil && ctx.Err() == nil {
			l.AfterFlush(err)
		}
		l.progress.flushed()
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

// Cycle is one of Run's passes done in the caller's goroutine, for tests
// and one-shot use: it polls the repository, reconciles each plan at the
// branch's head that is not at rest, one at a time along the path Run's
// workers take, writes the statuses, and returns what failed.
func (l *Loop) Cycle(ctx context.Context) error {
	l.init()
	cycle, files, err := l.pass(ctx)
	l.progress.passDone()
	errs := []error{err}
	for _, f := range files {
		name := f.Plan.Metadata.Name
		if _, _, err := l.reconcileQueued(ctx, name); err != nil {
			errs = append(errs, fmt.Errorf("plan %s: %w", name, err))
		}
	}
	if l.Recorder != nil && cycle.Revision != "" {
		if err := l.flush(ctx, cycle); err != nil {
			errs = append(errs, fmt.Errorf("record status: %w", err))
		}
	}
	return errors.Join(errs...)
}
