package reconciler

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestWatchdog runs the loop against a real Git server behind a proxy that
// then accepts connections and never answers: /healthz fails, naming the
// stage the loop is stuck in, and once the server answers again the loop
// ends passes and /healthz passes again.
func TestWatchdog(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	g := testenv.StartGit(t, testenv.SeedDir(t, map[string]string{"plans/capi-quickstart.yaml": testenv.ExamplePlan(t, "")}))
	base, err := url.Parse(g.BaseURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.StartProxy(t, base.Host)
	// The Git call's bound is longer than the watchdog's, so that the
	// stall shows before the call fails.
	const gitTimeout, stallAfter = 4 * time.Second, time.Second
	src, err := gitsource.New(gitsource.Config{URL: "http://" + proxy.Addr + "/plans.git", CacheDir: t.TempDir(), Timeout: gitTimeout, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	var passes, failures atomic.Int64
	l := &Loop{Source: GitSource{Source: src}, Observer: &fixedObserver{snap: observed.Snapshot{Secrets: adoptSecrets()}},
		Publisher: &recordingPublisher{}, Timeout: time.Minute,
		AfterCycle: func(err error) {
			if err != nil {
				failures.Add(1)
				return
			}
			passes.Add(1)
		}}
	m := NewMetrics(nil)
	m.Watch(l, stallAfter, discard)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = m.Serve(ctx, ln) }()
	go func() { _ = l.Run(ctx, 100*time.Millisecond) }()

	healthz := func() (int, string) {
		resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	waitFor := func(what string, within time.Duration, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(within)
		for !ok() {
			if time.Now().After(deadline) {
				code, body := healthz()
				t.Fatalf("%s: not within %s (passes %d, failed %d; /healthz %d %q)", what, within, passes.Load(), failures.Load(), code, body)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	waitFor("a pass through the proxy", 30*time.Second, func() bool { return passes.Load() > 0 })
	if code, body := healthz(); code != http.StatusOK {
		t.Fatalf("/healthz of a moving loop: %d %q", code, body)
	}

	if err := proxy.Blackhole(); err != nil {
		t.Fatal(err)
	}
	var stalled string
	waitFor("/healthz to fail while the Git server does not answer", 3*gitTimeout, func() bool {
		code, body := healthz()
		stalled = body
		return code == http.StatusServiceUnavailable
	})
	if !strings.Contains(stalled, stagePoll) {
		t.Errorf("/healthz during the stall says %q; want the stage %q", stalled, stagePoll)
	}
	waitFor("the stalled poll to fail at its timeout", 3*gitTimeout, func() bool { return failures.Load() > 0 })

	if err := proxy.Pass(); err != nil {
		t.Fatal(err)
	}
	before := passes.Load()
	waitFor("passes once the Git server answers again", 3*gitTimeout, func() bool { return passes.Load() > before+2 })
	if code, body := healthz(); code != http.StatusOK {
		t.Errorf("/healthz after recovery: %d %q", code, body)
	}
}

// TestStalledOnlyWhileRunning: a replica that waits for the leader
// election runs no loop and is not stalled, however long it waits.
func TestStalledOnlyWhileRunning(t *testing.T) {
	l := &Loop{Source: &memSource{}, Observer: &fixedObserver{}}
	l.Changed("default", "c") // informers start before the election is won
	time.Sleep(20 * time.Millisecond)
	if err := l.Stalled(10 * time.Millisecond); err != nil {
		t.Fatalf("a loop that never ran is stalled: %v", err)
	}
	l.progress.start()
	l.progress.enter(stagePoll)
	time.Sleep(20 * time.Millisecond)
	if err := l.Stalled(10 * time.Millisecond); err == nil || !strings.Contains(err.Error(), stagePoll) {
		t.Fatalf("a running loop stuck polling: %v", err)
	}
}

// failingRecorder is a recorder whose status writes fail, counting them.
type failingRecorder struct {
	recorder
	flushes atomic.Int64
}

func (r *failingRecorder) Flush(context.Context, Cycle) error {
	r.flushes.Add(1)
	return io.ErrUnexpectedEOF
}

// TestFlushBacksOff: while status writes fail (the Git remote is down),
// Run tries less and less often, rather than at every StatusEvery.
func TestFlushBacksOff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 1300*time.Millisecond)
	defer cancel()
	src := &memSource{}
	src.set("r1", map[string]string{"plans/capi-quickstart.yaml": testenv.ExamplePlan(t, "")})
	rec := &failingRecorder{recorder: recorder{planned: map[string]*planner.Result{}}}
	l := &Loop{Source: src, Observer: &fixedObserver{snap: observed.Snapshot{Secrets: adoptSecrets()}}, Publisher: &recordingPublisher{},
		Recorder: rec, StatusEvery: 10 * time.Millisecond}
	_ = l.Run(ctx, 5*time.Millisecond)
	// Every 10ms would be about 130 writes; doubling from 20ms, 6.
	if n := rec.flushes.Load(); n < 2 || n > 10 {
		t.Errorf("%d status writes in 1.3s while every one failed; want a few, backing off", n)
	}
}
