package forge

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ferry-dev/ferry/internal/failure"
)

// Coalescer is a Forge that sends comment and status updates from its own
// goroutine, so that the reconciler loop never waits on GitHub. For each
// comment (pull request, key) and each status (sha, context) it keeps only the
// latest update, sends it at most once per Interval, and sends nothing for an
// update equal to the last one sent. Calls go out one at a time, as GitHub
// asks of clients that write. Rate limits pause every call until GitHub's
// reset or Retry-After; server and network errors are retried with capped
// exponential back-off; any other 4xx answer is logged and the update
// dropped. Reads pass straight through to the wrapped Forge.
//
// UpsertComment and SetStatus return at once: nil once the update is
// accepted, a terminal error for an update GitHub would refuse (a bad key or
// state), ErrClosed after Close.
type Coalescer struct {
	inner Forge
	opts  CoalescerOptions

	mu          sync.Mutex
	items       map[itemKey]*item
	pauseUntil  time.Time     // a rate limit holds every call until then
	changed     chan struct{} // closed and replaced when an update settles
	draining    bool          // Close called: ignore Interval, send what is left
	closed      bool
	superseded  int64
	skipped     int64
	retries     int64
	dropped     int64
	wake        chan struct{}
	stop        context.CancelFunc
	done        chan struct{}
	seq         uint64
	lastPruning time.Time
}

// itemKey names one comment (pr, key) or one status (sha, context).
type itemKey struct {
	pr          int
	key         string
	sha, status string
}

func (k itemKey) isComment() bool { return k.sha == "" }

// payload is what an item should show.
type payload struct {
	body                          string
	state, description, targetURL string
}

type item struct {
	want    payload
	sent    payload
	hasSent bool
	pending bool      // want has not been sent (nor dropped)
	due     time.Time // not before: last call + Interval
	retry   time.Time // not before: back-off or rate limit after a failure
	attempt int       // consecutive failures
	seq     uint64    // order of first pending update, for fairness
	last    time.Time // last call
}

// NewCoalescer starts a Coalescer in front of inner. Call Close to stop it.
func NewCoalescer(inner Forge, opts CoalescerOptions) *Coalescer {
	opts.defaults()
	ctx, cancel := context.WithCancel(context.Background()) //nolint:forbidigo // the worker lives until Close, longer than any caller's context
	c := &Coalescer{
		inner:   inner,
		opts:    opts,
		items:   map[itemKey]*item{},
		changed: make(chan struct{}),
		wake:    make(chan struct{}, 1),
		stop:    cancel,
		done:    make(chan struct{}),
	}
	go c.run(ctx)
	return c
}

// PullRequestsForCommit calls the wrapped Forge.
func (c *Coalescer) PullRequestsForCommit(ctx context.Context, sha string) ([]PullRequest, error) {
	return c.inner.PullRequestsForCommit(ctx, sha)
}

// OpenPullRequests calls the wrapped Forge.
func (c *Coalescer) OpenPullRequests(ctx context.Context) ([]PullRequest, error) {
	return c.inner.OpenPullRequests(ctx)
}

// Permission calls the wrapped Forge.
func (c *Coalescer) Permission(ctx context.Context, login string) (string, error) {
	return c.inner.Permission(ctx, login)
}

// Login calls the wrapped Forge, which remembers the answer.
func (c *Coalescer) Login(ctx context.Context) (string, error) {
	return c.inner.Login(ctx)
}

// PullRequestComments calls the wrapped Forge.
func (c *Coalescer) PullRequestComments(ctx context.Context, pr int) ([]IssueComment, error) {
	return c.inner.PullRequestComments(ctx, pr)
}

// UpsertComment queues body as the latest for the comment (pr, key).
func (c *Coalescer) UpsertComment(_ context.Context, pr int, key, body string) error {
	if err := checkKey(key); err != nil {
		return failure.Terminal(fmt.Errorf("upsert comment on #%d: %w", pr, err))
	}
	return c.put(itemKey{pr: pr, key: key}, payload{body: body})
}

// SetStatus queues the latest status for (sha, statusContext). The
// description is cut as GitHub.SetStatus cuts it, so that two descriptions
// that differ only past the cut count as one.
func (c *Coalescer) SetStatus(_ context.Context, sha, statusContext, state, description, targetURL string) error {
	if err := checkStatus(sha, state); err != nil {
		return failure.Terminal(fmt.Errorf("set status %s: %w", statusContext, err))
	}
	return c.put(itemKey{sha: sha, status: statusContext},
		payload{state: state, description: shorten(description, MaxStatusDescription), targetURL: targetURL})
}

func (c *Coalescer) put(k itemKey, u payload) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	it := c.items[k]
	if it == nil {
		it = &item{}
		c.items[k] = it
	} else if it.want == u {
		c.skipped++
		return nil
	}
	if it.pending {
		c.superseded++
	} else {
		c.seq++
		it.seq = c.seq
	}
	it.want = u
	it.pending = !it.hasSent || it.sent != u
	if !it.pending {
		// Back to what GitHub already shows: the queued update is moot.
		c.skipped++
		c.settled()
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
}

// Stats returns the wrapped Forge's counters, when it keeps any, with the
// Coalescer's own.
func (c *Coalescer) Stats() Stats {
	var s Stats
	if st, ok := c.inner.(interface{ Stats() Stats }); ok {
		s = st.Stats()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s.Superseded += c.superseded
	s.Skipped += c.skipped
	s.Retries += c.retries
	s.Dropped += c.dropped
	s.Pending += int64(c.pendingLocked())
	return s
}

func (c *Coalescer) pendingLocked() int {
	n := 0
	for _, it := range c.items {
		if it.pending {
			n++
		}
	}
	return n
}

// settled wakes Flush and Close waiters; c.mu is held.
func (c *Coalescer) settled() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Flush waits until every update accepted so far has been sent or dropped,
// or until ctx ends. It does not hurry them: Interval and back-off still
// apply.
func (c *Coalescer) Flush(ctx context.Context) error {
	for {
		c.mu.Lock()
		n, ch := c.pendingLocked(), c.changed
		c.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("flush forge updates: %d not sent: %w", n, ctx.Err())
		case <-ch:
		}
	}
}

// Close stops accepting updates, sends those still pending without waiting
// out Interval (rate limits and back-off still apply) until ctx ends, and
// stops the goroutine. The error counts the updates that were not sent.
func (c *Coalescer) Close(ctx context.Context) error {
	c.mu.Lock()
	if !c.closed {
		c.closed, c.draining = true, true
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	var err error
	select {
	case <-c.done:
	case <-ctx.Done():
		c.stop()
		<-c.done
	}
	c.mu.Lock()
	if n := c.pendingLocked(); n > 0 {
		err = fmt.Errorf("close forge coalescer: %d updates not sent: %w", n, context.Cause(ctx))
	}
	c.mu.Unlock()
	c.stop()
	return err
}
