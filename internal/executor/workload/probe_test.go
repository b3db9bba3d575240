package workload

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ferry-dev/ferry/internal/step"
)

// TestWorkloadProbe probes a real HTTP server whose application answers 200
// and then 503 as a drained node takes its last healthy replica along.
// A probe needs no cluster: the executor has no clients here.
func TestWorkloadProbe(t *testing.T) {
	var healthy atomic.Bool
	healthy.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		if !healthy.Load() {
			http.Error(w, "no healthy upstream", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	withUser := strings.Replace(srv.URL, "http://", "http://probe:workload-test-password@", 1)

	cases := []struct {
		name    string
		healthy bool
		params  map[string]string
		report  string
		wantErr []string
		// terminal is true when no retry can help.
		terminal bool
	}{
		{name: "200 passes", healthy: true,
			params: map[string]string{"url": srv.URL + "/healthz", "expect": "2xx"},
			report: "probe " + srv.URL + "/healthz answered 200 OK after Node wl-old-0"},
		{name: "503 is retryable, with the status", healthy: false,
			params:  map[string]string{"url": srv.URL + "/healthz", "expect": "2xx"},
			wantErr: []string{"probe " + srv.URL + "/healthz after Node wl-old-0: status 503 Service Unavailable, want 2xx"}},
		{name: "an exact code", healthy: true,
			params:  map[string]string{"url": srv.URL + "/missing", "expect": "200"},
			wantErr: []string{"status 404 Not Found, want 200"}},
		{name: "a refused connection is retryable", healthy: true,
			params:  map[string]string{"url": closedURL + "/healthz", "expect": "2xx"},
			wantErr: []string{"probe " + closedURL + "/healthz after Node wl-old-0", "connection refused"}},
		{name: "credentials in the URL are not shown", healthy: false,
			params:  map[string]string{"url": withUser + "/healthz", "expect": "2xx"},
			wantErr: []string{"status 503", "probe:xxxxx@"}},
		{name: "an expect that means nothing is terminal", healthy: true,
			params:  map[string]string{"url": srv.URL + "/healthz", "expect": "fine"},
			wantErr: []string{`expect parameter "fine"`}, terminal: true},
		{name: "no URL is terminal", healthy: true,
			params:  map[string]string{"expect": "2xx"},
			wantErr: []string{"url parameter is not an http(s) URL"}, terminal: true},
		{name: "a timeout that does not parse is terminal", healthy: true,
			params:  map[string]string{"url": srv.URL + "/healthz", "timeout": "soon"},
			wantErr: []string{`timeout parameter "soon"`}, terminal: true},
	}
	e := &Executor{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			healthy.Store(tc.healthy)
			step := stepEvent(step.Probe, step.Target{Kind: step.Node, Name: "wl-old-0"}, tc.params)
			// Twice: a probe changes nothing, so both runs agree.
			for run := 1; run <= 2; run++ {
				rep, err := e.Execute(context.Background(), step)
				checkWorkloadErr(t, err, tc.wantErr, tc.terminal)
				if err != nil && strings.Contains(err.Error(), "workload-test-password") {
					t.Errorf("error shows the URL's password: %v", err)
				}
				if len(tc.wantErr) == 0 && rep.Message != tc.report {
					t.Errorf("run %d: report %q, want %q", run, rep.Message, tc.report)
				}
			}
		})
	}
}
