package gitsource_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// deliveries records what a receiver answered to each delivery it got.
type deliveries struct {
	mu      sync.Mutex
	answers map[string][]int // by X-Gitea-Event
	fired   int
}

func (d *deliveries) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(rec, r)
		d.mu.Lock()
		d.answers[r.Header.Get("X-Gitea-Event")] = append(d.answers[r.Header.Get("X-Gitea-Event")], rec.code)
		d.mu.Unlock()
	})
}

func (d *deliveries) fire() {
	d.mu.Lock()
	d.fired++
	d.mu.Unlock()
}

// wait waits until the receiver answered an event, and returns its answers.
func (d *deliveries) wait(t *testing.T, event string) []int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		d.mu.Lock()
		got := append([]int(nil), d.answers[event]...)
		d.mu.Unlock()
		if len(got) > 0 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s delivery from Gitea within 20s", event)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

// TestWebhookFromGitea: a real Gitea delivers signed push, pull_request and
// issue_comment events to the receiver configured for Gitea, which accepts
// them; a receiver with another secret refuses the same deliveries.
func TestWebhookFromGitea(t *testing.T) {
	g := testenv.StartGitea(t, "")
	good := &deliveries{answers: map[string][]int{}}
	wrong := &deliveries{answers: map[string][]int{}}
	goodSrv := httptest.NewServer(good.wrap(gitsource.ForgeWebhookHandler(gitsource.GiteaWebhooks, []byte("the-secret"), good.fire)))
	defer goodSrv.Close()
	wrongSrv := httptest.NewServer(wrong.wrap(gitsource.ForgeWebhookHandler(gitsource.GiteaWebhooks, []byte("another-secret"), wrong.fire)))
	defer wrongSrv.Close()
	g.AddWebhook(t, goodSrv.URL, "the-secret")
	g.AddWebhook(t, wrongSrv.URL, "the-secret-as-gitea-has-it")

	g.PushBranch(t, testenv.GiteaMaintainer, "hooks", "A change", map[string]string{"plans/a.yaml": "spec: {}\n"})
	pr := g.OpenPullRequest(t, testenv.GiteaMaintainer, "hooks", "A change")
	g.Comment(t, testenv.GiteaReader, pr, "/ferry preview")

	for _, event := range []string{"push", "pull_request", "issue_comment"} {
		for _, code := range good.wait(t, event) {
			if code != http.StatusAccepted {
				t.Errorf("the receiver with Gitea's secret answered %s with %d; want 202", event, code)
			}
		}
		for _, code := range wrong.wait(t, event) {
			if code != http.StatusUnauthorized {
				t.Errorf("the receiver with another secret answered %s with %d; want 401", event, code)
			}
		}
	}
	good.mu.Lock()
	defer good.mu.Unlock()
	wrong.mu.Lock()
	defer wrong.mu.Unlock()
	if good.fired < 3 || wrong.fired != 0 {
		t.Errorf("triggered %d times with the right secret (want 3 or more), %d with another (want 0)", good.fired, wrong.fired)
	}
}
