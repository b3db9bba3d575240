package forge

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/testing/fakegithub"
)

// newCoalescer puts a Coalescer with millisecond timings in front of a client
// of f, and closes it at the end of the test.
func newCoalescer(t *testing.T, f *fakegithub.Server, interval time.Duration, log *slog.Logger) *Coalescer {
	t.Helper()
	if log == nil {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	c := NewCoalescer(client(t, f), CoalescerOptions{
		Interval:      interval,
		BackOff:       5 * time.Millisecond,
		MaxBackOff:    50 * time.Millisecond,
		RateLimitWait: 100 * time.Millisecond,
		Logger:        log,
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	return c
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// queued fails the test when a Coalescer refused a write.
func queued(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func flush(t *testing.T, c *Coalescer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestCoalescerKeepsLatestComment(t *testing.T) {
	f := newFakeGitHub(t)
	f.AddPR(fakegithub.PR{Number: 4, State: "open", Head: "h", Base: "main"})
	c := newCoalescer(t, f, 200*time.Millisecond, nil)
	ctx := context.Background()
	const key = "plan/prod"

	start := time.Now()
	for i := range 50 {
		if err := c.UpsertComment(ctx, 4, key, Comment(key, "Progress", fmt.Sprintf("step %d of 50", i+1))); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("50 updates took %v: the caller waited on GitHub", d)
	}
	flush(t, c)
	writes := len(f.Calls(http.MethodPost)) + len(f.Calls(http.MethodPatch))
	if writes > 2 {
		t.Errorf("%d writes for 50 updates within one interval, want at most 2", writes)
	}
	cs := f.Comments(4)
	if len(cs) != 1 || !strings.Contains(cs[0].Body, "step 50 of 50") {
		t.Fatalf("comments %+v, want one showing the last update", cs)
	}

	// The same body again, and a status twice: one status call, nothing else.
	before := len(f.Calls(""))
	queued(t, c.UpsertComment(ctx, 4, key, Comment(key, "Progress", "step 50 of 50")))
	queued(t, c.SetStatus(ctx, "h", "ferry/plan/prod", StateSuccess, "done", ""))
	queued(t, c.SetStatus(ctx, "h", "ferry/plan/prod", StateSuccess, "done", ""))
	flush(t, c)
	time.Sleep(300 * time.Millisecond) // past the interval: nothing may be sent late
	if n := len(f.Calls("")) - before; n != 1 {
		t.Errorf("repeated updates cost %d requests, want 1 (the first status)", n)
	}
	s := c.Stats()
	if s.Skipped != 2 || s.Superseded < 48 || s.Pending != 0 || s.StatusesSet != 1 {
		t.Errorf("stats %+v", s)
	}
	if s.Requests != int64(len(f.Calls(""))) {
		t.Errorf("Stats.Requests = %d, the server saw %d", s.Requests, len(f.Calls("")))
	}
}

func TestCoalescerRetriesRateLimits(t *testing.T) {
	soon := func() string { return strconv.FormatInt(time.Now().Add(time.Second).Unix(), 10) }
	for _, tc := range []struct {
		name   string
		status int
		header func() map[string]string
		body   string
	}{
		{name: "429 Retry-After", status: http.StatusTooManyRequests,
			header: func() map[string]string { return map[string]string{"Retry-After": "1"} },
			body:   `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`},
		{name: "403 primary", status: http.StatusForbidden,
			header: func() map[string]string {
				return map[string]string{"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": soon()}
			},
			body: `{"message":"API rate limit exceeded for installation ID 1.","documentation_url":"https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"}`},
		{name: "403 secondary", status: http.StatusForbidden,
			header: func() map[string]string { return map[string]string{"Retry-After": "1"} },
			body:   `{"message":"You have exceeded a secondary rate limit.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeGitHub(t)
			c := newCoalescer(t, f, 10*time.Millisecond, nil)
			f.Fail(http.MethodPost, "/statuses/s1", tc.status, tc.header(), tc.body)
			start := time.Now()
			if err := c.SetStatus(context.Background(), "s1", "ferry", StatePending, "running", ""); err != nil {
				t.Fatal(err)
			}
			flush(t, c)
			if d := time.Since(start); d < 900*time.Millisecond && tc.status == http.StatusTooManyRequests {
				t.Errorf("retried after %v, before Retry-After", d)
			}
			if st := f.Statuses(); len(st) != 1 || len(f.Calls(http.MethodPost)) != 2 {
				t.Errorf("statuses %+v after %d calls, want one after 2", st, len(f.Calls(http.MethodPost)))
			}
			if s := c.Stats(); s.RateLimited != 1 || s.Retries != 1 || s.Dropped != 0 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

func TestCoalescerRetriesServerErrors(t *testing.T) {
	f := newFakeGitHub(t)
	f.AddPR(fakegithub.PR{Number: 8, State: "open", Head: "h", Base: "main"})
	c := newCoalescer(t, f, 5*time.Millisecond, nil)
	f.Fail(http.MethodPost, "/issues/8/comments", http.StatusInternalServerError, nil, `{"message":"Server Error"}`)
	f.Fail(http.MethodPost, "/issues/8/comments", http.StatusInternalServerError, nil, `{"message":"Server Error"}`)
	if err := c.UpsertComment(context.Background(), 8, "k", "body"); err != nil {
		t.Fatal(err)
	}
	flush(t, c)
	if cs := f.Comments(8); len(cs) != 1 {
		t.Fatalf("comments %+v", cs)
	}
	if n := len(f.Calls(http.MethodPost)); n != 3 {
		t.Errorf("%d create calls, want 3", n)
	}
	if s := c.Stats(); s.ServerErrors != 2 || s.Retries != 2 || s.CommentsCreated != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestCoalescerDropsClientErrors(t *testing.T) {
	f := newFakeGitHub(t)
	c := newCoalescer(t, f, 5*time.Millisecond, nil)
	ctx := context.Background()
	// Pull request 404 does not exist: listing its comments is a 404.
	if err := c.UpsertComment(ctx, 404, "k", "body"); err != nil {
		t.Fatal(err)
	}
	flush(t, c)
	time.Sleep(50 * time.Millisecond)
	if n := len(f.Calls("")); n != 1 {
		t.Errorf("%d requests, want the one that answered 404", n)
	}
	// The same update again is not retried either; a new one is tried.
	queued(t, c.UpsertComment(ctx, 404, "k", "body"))
	flush(t, c)
	if n := len(f.Calls("")); n != 1 {
		t.Errorf("the dropped update was sent again")
	}
	queued(t, c.UpsertComment(ctx, 404, "k", "other body"))
	flush(t, c)
	if s := c.Stats(); s.Dropped != 2 || s.Requests != 2 || s.Pending != 0 || s.Retries != 0 {
		t.Errorf("stats %+v", s)
	}
	if err := c.SetStatus(ctx, "s", "c", "bogus", "", ""); err == nil {
		t.Errorf("an invalid state was accepted")
	}
}

// A GitHub that does not answer holds neither the caller nor other updates'
// acceptance; Close gives up at its deadline and says how much was not sent.
func TestCoalescerNeverBlocksTheCaller(t *testing.T) {
	f := newFakeGitHub(t)
	gate := make(chan struct{})
	f.Gate(gate)
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	c := NewCoalescer(client(t, f), CoalescerOptions{Interval: time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	start := time.Now()
	for i := range 100 {
		queued(t, c.SetStatus(ctx, fmt.Sprintf("sha%d", i%10), "ferry", StatePending, strconv.Itoa(i), ""))
		queued(t, c.UpsertComment(ctx, i%3, "k", strconv.Itoa(i)))
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("200 updates against a stalled GitHub took %v", d)
	}
	closeCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	err := c.Close(closeCtx)
	if err == nil || !strings.Contains(err.Error(), "13 updates not sent") {
		t.Errorf("Close = %v, want 13 updates not sent", err)
	}
	//nolint:errorlint // ErrClosed itself, as its doc says, not an error that wraps it
	if err := c.SetStatus(ctx, "sha", "ferry", StatePending, "", ""); err != ErrClosed {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
	release()
}

// Close sends what is pending without waiting out the interval.
func TestCoalescerCloseDrains(t *testing.T) {
	f := newFakeGitHub(t)
	c := NewCoalescer(client(t, f), CoalescerOptions{Interval: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	queued(t, c.SetStatus(ctx, "s", "ferry", StatePending, "started", ""))
	queued(t, c.SetStatus(ctx, "s", "ferry", StateSuccess, "done", ""))
	closeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Close(closeCtx); err != nil {
		t.Fatal(err)
	}
	if st := f.Statuses(); len(st) == 0 || st[len(st)-1].State != StateSuccess {
		t.Errorf("statuses %+v, want the last one success", st)
	}
}

func TestCoalescerNeverLogsTheToken(t *testing.T) {
	f := newFakeGitHub(t)
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := newCoalescer(t, f, time.Millisecond, log)
	f.Fail(http.MethodPost, "/statuses/s", http.StatusInternalServerError, nil, `{"message":"boom"}`)
	f.Fail(http.MethodPost, "/statuses/s", http.StatusUnauthorized, nil, `{"message":"Bad credentials"}`)
	queued(t, c.SetStatus(context.Background(), "s", "ferry", StatePending, "", ""))
	flush(t, c)
	mu.Lock()
	defer mu.Unlock()
	if out := buf.String(); !strings.Contains(out, "update dropped") || strings.Contains(out, f.Token) {
		t.Errorf("log:\n%s", out)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}
