// The Coalescer's goroutine: which update goes next, and sending it.
// An update's outcome (sent, rate limited, retried or dropped) is filed here.

package forge

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/ferry-dev/ferry/internal/failure"
)

// run sends due updates one at a time until ctx ends or, once draining,
// nothing is left.
func (c *Coalescer) run(ctx context.Context) {
	defer close(c.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		c.mu.Lock()
		now := time.Now()
		c.pruneLocked(now)
		k, at, ok := c.nextLocked()
		if !ok && c.draining {
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if ok && !at.After(now) {
			c.send(ctx, k)
			if ctx.Err() != nil {
				return
			}
			continue
		}
		wait := time.Hour
		if ok {
			wait = at.Sub(now)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		case <-timer.C:
		}
		timer.Stop() // since Go 1.23, Stop and Reset leave no stale tick behind
	}
}

// nextLocked returns the pending item to send first and when it may go:
// the earliest allowed, then the longest waiting.
func (c *Coalescer) nextLocked() (itemKey, time.Time, bool) {
	var (
		best   itemKey
		bestAt time.Time
		bestIt *item
	)
	for k, it := range c.items {
		if !it.pending {
			continue
		}
		at := maxTime(it.retry, c.pauseUntil)
		if !c.draining {
			at = maxTime(at, it.due)
		}
		if bestIt == nil || at.Before(bestAt) || (at.Equal(bestAt) && it.seq < bestIt.seq) {
			best, bestAt, bestIt = k, at, it
		}
	}
	return best, bestAt, bestIt != nil
}

// pruneLocked forgets items sent and idle for longer than Retention, at most
// once a minute: statuses of old commits would otherwise pile up.
func (c *Coalescer) pruneLocked(now time.Time) {
	if now.Sub(c.lastPruning) < time.Minute {
		return
	}
	c.lastPruning = now
	for k, it := range c.items {
		if !it.pending && now.Sub(it.last) > c.opts.Retention {
			delete(c.items, k)
		}
	}
}

// send makes the call for k's latest update and files the outcome.
func (c *Coalescer) send(ctx context.Context, k itemKey) {
	c.mu.Lock()
	it := c.items[k]
	u := it.want
	retry := it.attempt > 0
	if retry {
		c.retries++
	}
	c.mu.Unlock()

	log := c.opts.Logger
	if k.isComment() {
		log = log.With("pr", k.pr, "key", k.key)
	} else {
		log = log.With("sha", k.sha, "context", k.status, "state", u.state)
	}
	log.Debug("forge: sending update", "retry", retry)
	err := c.call(ctx, k, u)

	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	it.last = now
	it.due = now.Add(c.opts.Interval)
	if ctx.Err() != nil && isCanceled(ctx, err) {
		return // stopping: the update stays pending, for Close to count
	}
	c.fileLocked(it, u, err, now, log)
}

// call makes the one call to the wrapped Forge that shows u, bounded by
// CallTimeout.
func (c *Coalescer) call(ctx context.Context, k itemKey, u payload) error {
	callCtx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	defer cancel()
	if k.isComment() {
		return c.inner.UpsertComment(callCtx, k.pr, k.key, u.body)
	}
	return c.inner.SetStatus(callCtx, k.sha, k.status, u.state, u.description, u.targetURL)
}

// fileLocked files the outcome err of the call at now that sent u for it:
// a rate limit pauses every call, success records u as shown, a terminal
// error drops the update, any other error schedules a retry with back-off;
// c.mu is held.
func (c *Coalescer) fileLocked(it *item, u payload, err error, now time.Time, log *slog.Logger) {
	if at, limited := retryAt(err, now, c.opts.RateLimitWait); err != nil && limited {
		it.attempt++
		it.retry = at
		c.pauseUntil = maxTime(c.pauseUntil, at)
		log.Warn("forge: rate limited; every update waits", "until", at.Format(time.RFC3339), "error", err)
		return
	}
	switch {
	case err == nil:
		it.sent, it.hasSent, it.attempt, it.retry = u, true, 0, time.Time{}
		it.pending = it.want != u
	case failure.IsTerminal(err) || errors.Is(err, ErrClosed):
		// Retrying cannot help; keep what GitHub shows as the last sent,
		// and wait for a different update.
		c.dropped++
		it.attempt, it.retry, it.pending = 0, time.Time{}, false
		log.Error("forge: update dropped", "error", err)
	default:
		it.attempt++
		d := c.opts.backOff(it.attempt)
		it.retry = now.Add(d)
		log.Warn("forge: update failed; retrying", "in", d.String(), "attempt", it.attempt, "error", err)
	}
	if !it.pending {
		c.settled()
	}
}
