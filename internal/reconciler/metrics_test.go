package reconciler

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/step"
)

func TestMetricsServer(t *testing.T) {
	fetches := 0.0
	m := NewMetrics(map[string]func() float64{"ferry_git_fetches_total": func() float64 { return fetches }})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + ln.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
	if code, _ := get("/readyz"); code != 503 {
		t.Errorf("/readyz before a cycle = %d, want 503", code)
	}
	m.ObserveCycle(nil)
	m.ObservePhases(map[string][]planner.PhaseState{"a": {planner.Succeeded, planner.Approved, planner.Pending}})
	m.ObserveResult(&events.ResultEvent{Executor: step.Kube, Outcome: events.Succeeded, Duration: 20 * time.Millisecond})
	fetches = 3
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz after a cycle = %d", code)
	}
	_, body := get("/metrics")
	for _, want := range []string{
		`ferry_plan_phases{state="Succeeded"} 1`,
		`ferry_steps_total{executor="kube",outcome="Succeeded"} 1`,
		`ferry_step_duration_seconds_count{executor="kube"} 1`,
		`ferry_git_fetches_total 3`,
		`ferry_cycles_total{result="ok"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
