// How a Coalescer is tuned: intervals, back-off, timeouts and their defaults.

package forge

import (
	"log/slog"
	"time"
)

// CoalescerOptions configure a Coalescer. Zero values take the defaults.
type CoalescerOptions struct {
	// Interval is the least time between two calls for the same comment
	// (pull request and key) or status (sha and context). The first update
	// of each goes out at once; later ones wait out the interval, and only
	// the latest is sent. Default 10s.
	Interval time.Duration
	// BackOff is the delay before retrying a call that failed with a server
	// error or a network error; it doubles per failure up to MaxBackOff.
	// Defaults Interval and 5m. A retry is a call too, so it also waits out
	// Interval. Such calls are retried until they succeed or a newer update
	// replaces them: the update is the state ferry wants shown, and a
	// GitHub outage ends.
	BackOff, MaxBackOff time.Duration
	// RateLimitWait is the wait after a rate-limit answer that names no
	// time. Default DefaultRateLimitWait.
	RateLimitWait time.Duration
	// CallTimeout bounds one call to the wrapped Forge. Default 1m.
	CallTimeout time.Duration
	// Retention is how long an update that was sent is remembered, so that
	// an identical one costs nothing. Default 1h.
	Retention time.Duration
	// Logger receives a line per call and per failure. Default
	// slog.Default().
	Logger *slog.Logger
}

func (o *CoalescerOptions) defaults() {
	if o.Interval <= 0 {
		o.Interval = 10 * time.Second
	}
	if o.BackOff <= 0 {
		o.BackOff = o.Interval
	}
	if o.MaxBackOff <= 0 {
		o.MaxBackOff = 5 * time.Minute
	}
	if o.RateLimitWait <= 0 {
		o.RateLimitWait = DefaultRateLimitWait
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = time.Minute
	}
	if o.Retention <= 0 {
		o.Retention = time.Hour
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// backOff returns the delay after the attempt-th consecutive failure.
func (o *CoalescerOptions) backOff(attempt int) time.Duration {
	d := o.BackOff
	for i := 1; i < attempt && d < o.MaxBackOff; i++ {
		d *= 2
	}
	return min(d, o.MaxBackOff)
}
