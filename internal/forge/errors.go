package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/ferry-dev/ferry/internal/failure"
)

// DefaultRateLimitWait is how long to wait after a rate-limit answer that
// says neither when to retry nor when the limit resets: GitHub asks for at
// least a minute before retrying a secondary rate limit.
const DefaultRateLimitWait = time.Minute

// RetryAfter reports whether err is a GitHub rate limit and how long to wait
// before the next request: until X-RateLimit-Reset for the primary limit,
// Retry-After for a secondary one, DefaultRateLimitWait when GitHub gave
// neither. It understands go-github's RateLimitError and AbuseRateLimitError
// and the 429 answers that go-github v60 leaves as plain ErrorResponses.
func RetryAfter(err error) (time.Duration, bool) {
	at, ok := retryAt(err, time.Now(), DefaultRateLimitWait)
	if !ok {
		return 0, false
	}
	return max(time.Until(at), 0), true
}

// retryAt returns when a request that failed with the rate limit err may be
// sent again, and false when err is not a rate limit.
func retryAt(err error, now time.Time, fallback time.Duration) (time.Time, bool) {
	var rl *github.RateLimitError
	if errors.As(err, &rl) {
		if reset := rl.Rate.Reset.Time; reset.After(now) {
			return reset, true
		}
		return now.Add(fallback), true
	}
	var ab *github.AbuseRateLimitError
	if errors.As(err, &ab) {
		if ab.RetryAfter != nil && *ab.RetryAfter >= 0 {
			return now.Add(*ab.RetryAfter), true
		}
		return now.Add(fallback), true
	}
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Response == nil || !isRateLimitAnswer(er.Response, er.Message) {
		return time.Time{}, false
	}
	h := er.Response.Header
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.Atoi(v); err == nil && s >= 0 {
			return now.Add(time.Duration(s) * time.Second), true
		}
		if t, err := http.ParseTime(v); err == nil {
			return maxTime(t, now), true
		}
	}
	if h.Get("X-RateLimit-Remaining") == "0" {
		if s, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			return maxTime(time.Unix(s, 0), now), true
		}
	}
	return now.Add(fallback), true
}

// isRateLimitAnswer reports whether a 403 or 429 answer is a rate limit as
// GitHub documents them: 429 always; 403 with the primary limit exhausted,
// a Retry-After header, or a message naming a rate limit (a 403 can also be
// a plain permission refusal, which is not retried).
func isRateLimitAnswer(resp *http.Response, message string) bool {
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
		return true
	case http.StatusForbidden:
		return resp.Header.Get("X-RateLimit-Remaining") == "0" ||
			resp.Header.Get("Retry-After") != "" ||
			strings.Contains(strings.ToLower(message), "rate limit")
	}
	return false
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// statusCode returns the HTTP status of a GitHub error answer, 0 for errors
// that carry none (a refused connection, a timeout).
func statusCode(err error) int {
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		return er.Response.StatusCode
	}
	return 0
}

// wrap names the operation in err and marks as terminal the client errors
// (4xx) that are not rate limits: a missing pull request, a token without
// the permission, a payload GitHub rejects. Retrying those cannot help.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if _, limited := retryAt(err, time.Now(), 0); !limited {
		if code := statusCode(err); code >= 400 && code < 500 {
			err = failure.Terminal(err)
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// isCanceled reports whether err comes from the caller's context ending
// rather than from GitHub.
func isCanceled(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}
