package monitoring_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/reconciler"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/step"
)

// exposedMetrics returns the names of the series the reconciler's metrics
// handler serves, scraped from it as `reconciler run` builds and serves it
// (reconciler.NewMetrics, Watch, Serve), after one observation of each
// kind so that every labelled family has a series. A histogram's names are
// its _bucket, _sum and _count series. The counters `reconciler run` adds
// from other parts (Git, forge and API calls) are not among them: an alert
// or a panel on them would fail this test until it runs the whole server.
func exposedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	m := reconciler.NewMetrics(nil)
	m.Watch(&reconciler.Loop{}, time.Minute, nil)
	m.ObserveCycle(nil)
	m.ObserveCycle(errors.New("poll: connection refused"))
	m.ObserveFlush(nil)
	m.ObserveFlush(errors.New("push: connection refused"))
	m.ObservePhases(map[string]*status.PlanStatus{"a": {Plan: "a", Phases: []status.PhaseStatus{{Name: "cluster", State: status.PhaseFailed}}}})
	ev := &events.ResultEvent{Executor: step.Kube, Action: step.Create, Target: "Cluster default/a", Outcome: events.Failed, Duration: time.Second}
	m.ObserveResult(ev)
	m.ObserveRoundTrip(ev, time.Minute)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = m.Serve(ctx, ln); close(done) }()
	defer func() { cancel(); <-done }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()

	// The text format announces each family: # TYPE name type.
	suffixes := map[string][]string{"histogram": {"_bucket", "_sum", "_count"}, "summary": {"", "_sum", "_count"}}
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		series, ok := suffixes[f[3]]
		if !ok {
			series = []string{""}
		}
		for _, s := range series {
			names[f[2]+s] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ferry_plan_phase", "ferry_steps_total", "ferry_step_duration_seconds_bucket", "go_goroutines", "process_resident_memory_bytes"} {
		if !names[want] {
			t.Fatalf("the metrics handler serves no %s; it serves %v", want, names)
		}
	}
	return names
}

// query is a PromQL expression of an alert or the dashboard, and where it
// is.
type query struct {
	where, expr string
}

// unknownMetrics parses each query and returns what is wrong with it: it
// does not parse, or it selects a metric the reconciler does not serve.
func unknownMetrics(t *testing.T, queries []query, exposed map[string]bool) []string {
	t.Helper()
	exprs := make([]string, len(queries))
	for i, q := range queries {
		exprs[i] = q.expr
	}
	names, errs := promqlNames(t, exprs)
	var problems []string
	for i, q := range queries {
		if errs[i] != "" {
			problems = append(problems, fmt.Sprintf("%s: %s", q.where, errs[i]))
		}
		for _, n := range names[i] {
			if !exposed[n] {
				problems = append(problems, fmt.Sprintf("%s: %s is not a metric the reconciler serves", q.where, n))
			}
		}
	}
	return problems
}

func TestQueriesUseServedMetrics(t *testing.T) {
	_, alerts := ruleGroups(t)
	queries := dashboardQueries(t)
	for _, a := range alerts {
		queries = append(queries, query{"alert " + a.Name, a.Expr})
	}
	for _, p := range unknownMetrics(t, queries, exposedMetrics(t)) {
		t.Error(p)
	}
}

// TestQueryCheckCatchesMistakes checks the check: a misspelled metric, a
// histogram without its _bucket suffix, a selector by regular expression
// and a syntax error are each reported; a good query is not.
func TestQueryCheckCatchesMistakes(t *testing.T) {
	exposed := exposedMetrics(t)
	for _, tc := range []struct {
		expr, want string
	}{
		{`max by (plan) (ferry_plan_phase{state="Failed"}) == 1`, ""},
		{`rate(process_cpu_seconds_total[5m]) and on () go_goroutines > 0`, ""},
		{`max by (plan) (ferry_plan_phasez{state="Failed"}) == 1`, "ferry_plan_phasez is not a metric"},
		{`histogram_quantile(0.9, rate(ferry_step_duration_seconds[5m]))`, "ferry_step_duration_seconds is not a metric"},
		{`{__name__=~"ferry_.*"}`, "not by name"},
		{`sum by (state (ferry_plan_phases)`, "parse"},
	} {
		problems := unknownMetrics(t, []query{{"test", tc.expr}}, exposed)
		switch {
		case tc.want == "" && len(problems) > 0:
			t.Errorf("%s: %v; want no problem", tc.expr, problems)
		case tc.want != "" && (len(problems) != 1 || !strings.Contains(problems[0], tc.want)):
			t.Errorf("%s: %v; want one problem with %q", tc.expr, problems, tc.want)
		}
	}
}

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	SchemaVersion int    `json:"schemaVersion"`
	UID           string `json:"uid"`
	Templating    struct {
		List []struct {
			Type  string          `json:"type"`
			Name  string          `json:"name"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource json.RawMessage `json:"datasource"`
	Targets    []struct {
		Expr       string          `json:"expr"`
		Datasource json.RawMessage `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	return d
}

// allPanels returns the panels with those of rows, in order.
func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// variable is a Grafana variable in a query: $name, ${name} or [[name]].
var variable = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]`)

// expand replaces Grafana's variables as Grafana would before sending a
// query: intervals with a duration, the dashboard's variables (which
// select label values) with a regular expression for all of them.
func expand(expr string) string {
	return variable.ReplaceAllStringFunc(expr, func(v string) string {
		if strings.Contains(v, "__") {
			return "5m" // $__rate_interval, $__interval, $__range
		}
		return ".*"
	})
}

// labelValues is Grafana's label_values(selector, label) variable query.
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*\w+\)$`)

// dashboardQueries returns every PromQL query of the dashboard: the
// panels' and the variables', with Grafana's variables expanded.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	d := readDashboard(t)
	var queries []query
	for _, p := range allPanels(d.Panels) {
		for i, tg := range p.Targets {
			queries = append(queries, query{fmt.Sprintf("panel %q query %d", p.Title, i), expand(tg.Expr)})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			_ = json.Unmarshal(v.Query, &q.Query) // the older form: a string
		}
		m := labelValues.FindStringSubmatch(strings.TrimSpace(q.Query))
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, q.Query)
			continue
		}
		queries = append(queries, query{"variable " + v.Name, expand(m[1])})
	}
	if len(queries) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	return queries
}

// TestDashboard checks what Grafana needs besides the queries: a schema
// version of Grafana 10/11, a Prometheus data source variable that every
// panel and query uses, unique panel IDs, and the panels promised.
func TestDashboard(t *testing.T) {
	d := readDashboard(t)
	if d.SchemaVersion < 36 || d.UID == "" {
		t.Errorf("schemaVersion %d, uid %q; want 36 or later and a uid", d.SchemaVersion, d.UID)
	}
	hasDatasource := false
	for _, v := range d.Templating.List {
		hasDatasource = hasDatasource || v.Type == "datasource" && v.Name == "datasource" && strings.Contains(string(v.Query), "prometheus")
	}
	if !hasDatasource {
		t.Error("no Prometheus data source variable named datasource")
	}
	usesVariable := func(raw json.RawMessage) bool {
		var ds struct{ Type, UID string }
		return json.Unmarshal(raw, &ds) == nil && ds.Type == "prometheus" && ds.UID == "${datasource}"
	}
	ids := map[int]string{}
	titles := map[string]bool{}
	for _, p := range allPanels(d.Panels) {
		if prev, ok := ids[p.ID]; ok || p.ID == 0 {
			t.Errorf("panel %q has id %d, as %q has", p.Title, p.ID, prev)
		}
		ids[p.ID], titles[p.Title] = p.Title, true
		if p.Type == "row" {
			continue
		}
		if !usesVariable(p.Datasource) {
			t.Errorf("panel %q has data source %s; want the variable ${datasource}", p.Title, p.Datasource)
		}
		for i, tg := range p.Targets {
			if !usesVariable(tg.Datasource) {
				t.Errorf("panel %q query %d has data source %s; want ${datasource}", p.Title, i, tg.Datasource)
			}
		}
	}
	for _, want := range []string{"Phases by state", "Plan phases", "Step attempts by outcome", "Step duration p50 / p95",
		"Last pass", "Passes per minute by result", "Memory", "CPU", "Goroutines"} {
		if !titles[want] {
			t.Errorf("no panel %q", want)
		}
	}
}
