package forge

import (
	"net/http"
	"strconv"
	"sync/atomic"
)

// Stats counts what ferry asked of the forge, for metrics and for the
// benchmark's GitHub calls per plan. GitHub fills the API fields; a Coalescer
// adds its own to those of the Forge it wraps.
type Stats struct {
	// Requests is every HTTP request sent to the API, reads included.
	Requests int64
	// RateLimited counts calls that failed on a rate limit, including those
	// that go-github refused without sending while a known limit lasted.
	RateLimited int64
	// ServerErrors counts 5xx answers.
	ServerErrors int64
	// RateRemaining is X-RateLimit-Remaining of the last answer that had
	// one; -1 before any.
	RateRemaining int64

	// CommentsCreated and CommentsEdited count successful writes;
	// CommentsUnchanged the upserts that found the body already there and
	// sent nothing more.
	CommentsCreated, CommentsEdited, CommentsUnchanged int64
	// StatusesSet counts commit statuses created.
	StatusesSet int64

	// Coalescer only. Superseded counts updates replaced by a newer one
	// before they were sent; Skipped, updates equal to what was already
	// sent or queued, which cost no call.
	Superseded, Skipped int64
	// Retries counts calls repeated after a rate limit, a server error or a
	// network error; Dropped, updates given up after an answer that
	// retrying cannot change (4xx other than a rate limit).
	Retries, Dropped int64
	// Pending is the number of updates accepted but not yet sent.
	Pending int64
}

// apiCounters are the GitHub client's counters, updated from its transport
// and its operations, possibly concurrently.
type apiCounters struct {
	requests, rateLimited, serverErrors, rateRemaining atomic.Int64
	created, edited, unchanged, statuses               atomic.Int64
}

func newAPICounters() *apiCounters {
	c := &apiCounters{}
	c.rateRemaining.Store(-1)
	return c
}

func (c *apiCounters) stats() Stats {
	return Stats{
		Requests:          c.requests.Load(),
		RateLimited:       c.rateLimited.Load(),
		ServerErrors:      c.serverErrors.Load(),
		RateRemaining:     c.rateRemaining.Load(),
		CommentsCreated:   c.created.Load(),
		CommentsEdited:    c.edited.Load(),
		CommentsUnchanged: c.unchanged.Load(),
		StatusesSet:       c.statuses.Load(),
	}
}

// countingTransport counts requests where they leave the process, so that
// every page of a list and every retry is one request, and nothing that
// go-github answered locally is.
type countingTransport struct {
	base http.RoundTripper
	c    *apiCounters
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.c.requests.Add(1)
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if v := resp.Header.Get("X-RateLimit-Remaining"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			t.c.rateRemaining.Store(n)
		}
	}
	if resp.StatusCode >= 500 {
		t.c.serverErrors.Add(1)
	}
	return resp, nil
}
