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

// RetryAfter reports whether err is a rate limit and how long to wait
// before the next request: until X-RateLimit-Reset for GitHub's primary
// limit, Retry-After for a secondary one (or a 429 from Gitea or the proxy
// in front of it), DefaultRateLimitWait when the answer gave neither. It
// understands go-github's RateLimitError and AbuseRateLimitError, the 429
// answers that go-github v60 leaves as plain ErrorResponses, and HTTPError.
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
	code, h, message := answer(err)
	if !isRateLimitAnswer(code, h, message) {
		return time.Time{}, false
	}
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
// a plain permission refusal, which is not retried). Gitea has no rate limit
// of its own, but the proxy in front of it may answer 429 with Retry-After.
func isRateLimitAnswer(code int, h http.Header, message string) bool {
	switch code {
	case http.StatusTooManyRequests:
		return true
	case http.StatusForbidden:
		return h.Get("X-RateLimit-Remaining") == "0" ||
			h.Get("Retry-After") != "" ||
			strings.Contains(strings.ToLower(message), "rate limit")
	}
	return false
}

// HTTPError is an answer other than 2xx from a forge's API whose client
// library has no error type of its own that keeps the status and headers
// (Gitea's SDK returns plain errors). Message is the forge's message, never
// a request header: it cannot hold the token.
type HTTPError struct {
	StatusCode int
	// Header holds the answer's headers, for Retry-After.
	Header  http.Header
	Message string
}

func (e *HTTPError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	}
	return fmt.Sprintf("HTTP %d: %s", e.StatusCode, e.Message)
}

// answer returns the HTTP status, headers and message of a forge's error
// answer; code 0 for errors that carry none (a refused connection, a
// timeout).
func answer(err error) (code int, h http.Header, message string) {
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		return er.Response.StatusCode, er.Response.Header, er.Message
	}
	var he *HTTPError
	if errors.As(err, &he) {
		h := he.Header
		if h == nil {
			h = http.Header{}
		}
		return he.StatusCode, h, he.Message
	}
	return 0, http.Header{}, ""
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// statusCode returns the HTTP status of a forge's error answer, 0 for
// errors that carry none (a refused connection, a timeout).
func statusCode(err error) int {
	code, _, _ := answer(err)
	return code
}

// wrap names the operation in err and marks as terminal the client errors
// (4xx) that are not rate limits: a missing pull request, a token without
// the permission, a payload the forge rejects. Retrying those cannot help.
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
// rather than from the forge.
func isCanceled(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}
