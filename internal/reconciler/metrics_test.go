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
	"github.com/ferry-dev/ferry/internal/status"
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
	done := make(chan struct{})
	go func() { _ = m.Serve(ctx, ln); close(done) }()
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
	// A replica waiting for the Lease is ready, and says so; once it
	// leads, it is ready after its first cycle.
	m.Standby(true)
	if code, body := get("/readyz"); code != 200 || !strings.Contains(body, "standing by") {
		t.Errorf("/readyz standing by = %d %q, want 200 standing by", code, body)
	}
	m.Standby(false)
	if code, _ := get("/readyz"); code != 503 {
		t.Errorf("/readyz leading before a cycle = %d, want 503", code)
	}
	m.ObserveCycle(nil)
	plan := &status.PlanStatus{Plan: "a", Phases: []status.PhaseStatus{{Name: "cluster", State: status.PhaseSucceeded},
		{Name: "control-plane", State: status.PhaseRunning}, {Name: "workers", State: status.PhasePending}}}
	m.ObservePhases(map[string]*status.PlanStatus{"a": plan})
	// The control plane fails: its Running series goes, its Failed one
	// comes.
	plan.Phases[1].State = status.PhaseFailed
	m.ObservePhases(map[string]*status.PlanStatus{"a": plan})
	m.ObserveResult(&events.ResultEvent{Executor: step.Kube, Action: step.Create, Target: "Cluster default/a", Outcome: events.Succeeded, Duration: 20 * time.Millisecond})
	m.ObserveResult(&events.ResultEvent{Executor: step.Kube, StepKey: "cluster/copy-secret/secret/a-sa", Outcome: events.Failed, Duration: time.Second})
	fetches = 3
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz after a cycle = %d", code)
	}
	_, body := get("/metrics")
	for _, want := range []string{
		`ferry_plan_phases{state="Succeeded"} 1`,
		`ferry_plan_phases{state="Failed"} 1`,
		`ferry_plan_phases{state="Running"} 0`,
		`ferry_plan_phases{state="RollingBack"} 0`,
		`ferry_plan_phase{phase="control-plane",plan="a",state="Failed"} 1`,
		`ferry_plan_phase{phase="workers",plan="a",state="Pending"} 1`,
		`ferry_steps_total{action="create",executor="kube",kind="Cluster",outcome="Succeeded"} 1`,
		`ferry_steps_total{action="copy-secret",executor="kube",kind="Secret",outcome="Failed"} 1`,
		`ferry_step_duration_seconds_count{action="create",executor="kube",kind="Cluster"} 1`,
		"go_goroutines ",
		"process_resident_memory_bytes ",
		`ferry_git_fetches_total 3`,
		`ferry_cycles_total{result="ok"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, `plan="a",state="Running"`) {
		t.Errorf("/metrics still shows the control plane Running after it failed")
	}
	// A plan gone takes its series with it.
	m.ObservePhases(map[string]*status.PlanStatus{})
	if _, body := get("/metrics"); strings.Contains(body, `plan="a"`) {
		t.Errorf("/metrics still shows plan a after it went")
	}
}
