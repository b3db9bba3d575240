package monitoring_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// objects is the kustomization as `kubectl apply -k deploy/monitoring`
// applies it.
func objects(t *testing.T) map[string]*unstructured.Unstructured {
	t.Helper()
	byKind := map[string]*unstructured.Unstructured{}
	for _, o := range testenv.Kustomize(t, ".") {
		if byKind[o.GetKind()] != nil {
			t.Fatalf("two %s objects; the tests expect one of each kind", o.GetKind())
		}
		byKind[o.GetKind()] = o
	}
	return byKind
}

func TestKustomization(t *testing.T) {
	objs := objects(t)
	for _, kind := range []string{"PrometheusRule", "PodMonitor", "ConfigMap"} {
		o := objs[kind]
		if o == nil {
			t.Fatalf("no %s in the kustomization", kind)
		}
		if o.GetNamespace() != "ferry-system" {
			t.Errorf("%s %s is in namespace %q; want ferry-system", kind, o.GetName(), o.GetNamespace())
		}
	}
	if v := objs["PrometheusRule"].GetAPIVersion(); v != "monitoring.coreos.com/v1" {
		t.Errorf("PrometheusRule is %s; want monitoring.coreos.com/v1", v)
	}

	// Grafana's sidecar loads the dashboard from the ConfigMap as it is
	// in the file.
	cm := objs["ConfigMap"]
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("ConfigMap %s has labels %v; Grafana's sidecar wants grafana_dashboard: \"1\"", cm.GetName(), cm.GetLabels())
	}
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	file, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 1 || data["ferry-reconciler.json"] != string(file) {
		t.Errorf("ConfigMap %s holds %d keys; want ferry-reconciler.json with grafana-dashboard.json", cm.GetName(), len(data))
	}

	// The PodMonitor scrapes the port deploy/base's Deployment names
	// metrics, on the pods it labels.
	pm := objs["PodMonitor"]
	sel, _, _ := unstructured.NestedStringMap(pm.Object, "spec", "selector", "matchLabels")
	eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	if sel["app.kubernetes.io/name"] != "ferry-reconciler" || len(eps) != 1 || eps[0].(map[string]any)["port"] != "metrics" {
		t.Errorf("PodMonitor selects %v on %v; want app.kubernetes.io/name: ferry-reconciler, port metrics", sel, eps)
	}
}

// alert is one alerting rule of the PrometheusRule.
type alert struct {
	Group, Name, Expr string
}

// ruleGroups returns the PrometheusRule's spec.groups, which is a
// Prometheus rule file's groups, and its alerts.
func ruleGroups(t *testing.T) ([]any, []alert) {
	t.Helper()
	groups, ok, err := unstructured.NestedSlice(objects(t)["PrometheusRule"].Object, "spec", "groups")
	if !ok || err != nil {
		t.Fatalf("PrometheusRule has no spec.groups: %v", err)
	}
	var alerts []alert
	for _, g := range groups {
		g := g.(map[string]any)
		rules, _ := g["rules"].([]any)
		for _, r := range rules {
			r := r.(map[string]any)
			if name, ok := r["alert"].(string); ok {
				expr, _ := r["expr"].(string)
				alerts = append(alerts, alert{Group: g["name"].(string), Name: name, Expr: expr})
			}
		}
	}
	if len(alerts) == 0 {
		t.Fatal("PrometheusRule has no alerts")
	}
	return groups, alerts
}

// writeRules writes groups as the rule file rules.yaml in dir, with the
// unit tests beside it, and returns dir.
func writeRules(t *testing.T, dir string, groups []any) string {
	t.Helper()
	rules, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join("testdata", "rules_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"rules.yaml": rules, "rules_test.yaml": tests} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// promtool runs promtool with args in dir and returns its output and
// whether it exited 0.
func promtool(t *testing.T, dir string, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command(testenv.Promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if exit := (*exec.ExitError)(nil); err != nil && !errors.As(err, &exit) {
		t.Fatalf("promtool %s: %v", strings.Join(args, " "), err)
	}
	return string(out), err == nil
}

// TestRules checks the rule file as Prometheus loads it: expressions,
// durations, label and annotation templates.
func TestRules(t *testing.T) {
	groups, alerts := ruleGroups(t)
	dir := writeRules(t, t.TempDir(), groups)
	if out, ok := promtool(t, dir, "check", "rules", "--lint-fatal", "rules.yaml"); !ok {
		t.Fatalf("promtool check rules:\n%s", out)
	}
	for _, want := range []string{"FerryPhaseFailed", "FerryPhaseBlocked", "FerryLoopStalled", "FerryCyclesFailing", "FerryStepsFailing"} {
		found := false
		for _, a := range alerts {
			found = found || a.Name == want
		}
		if !found {
			t.Errorf("no alert %s", want)
		}
	}
	for _, a := range alerts {
		r := rule(groups, a.Name)
		annotations, _ := r["annotations"].(map[string]any)
		for _, key := range []string{"summary", "description", "runbook"} {
			if s, _ := annotations[key].(string); s == "" {
				t.Errorf("%s has no %s annotation", a.Name, key)
			}
		}
		if labels, _ := r["labels"].(map[string]any); labels["severity"] != "critical" && labels["severity"] != "warning" {
			t.Errorf("%s has severity %v; want critical or warning", a.Name, labels["severity"])
		}
	}
}

// TestAlertsFire runs the alerts' unit tests: each fires on the series it
// promises to, with its labels and annotations, and not on healthy ones.
func TestAlertsFire(t *testing.T) {
	groups, _ := ruleGroups(t)
	dir := writeRules(t, t.TempDir(), groups)
	if out, ok := promtool(t, dir, "test", "rules", "rules_test.yaml"); !ok {
		t.Fatalf("promtool test rules testdata/rules_test.yaml:\n%s", out)
	}
}

// TestAlertTestsCatchBrokenRules checks the unit tests themselves: with
// any one alert's metric names misspelled, the alert selects nothing, and
// its tests must fail, naming it.
func TestAlertTestsCatchBrokenRules(t *testing.T) {
	_, alerts := ruleGroups(t)
	for _, a := range alerts {
		t.Run(a.Name, func(t *testing.T) {
			groups, _ := ruleGroups(t)
			r := rule(groups, a.Name)
			r["expr"] = strings.ReplaceAll(a.Expr, "ferry_", "ferri_")
			dir := writeRules(t, t.TempDir(), groups)
			out, ok := promtool(t, dir, "test", "rules", "rules_test.yaml")
			if ok {
				t.Fatalf("promtool test rules passed with %s's expression broken:\n%s", a.Name, r["expr"])
			}
			if !strings.Contains(out, "alertname: "+a.Name) {
				t.Errorf("promtool test rules failed, but not on %s:\n%s", a.Name, out)
			}
		})
	}
}

// rule returns the alerting rule named name in groups (for changing it in
// place).
func rule(groups []any, name string) map[string]any {
	for _, g := range groups {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			if r := r.(map[string]any); r["alert"] == name {
				return r
			}
		}
	}
	return nil
}

// promqlNames parses exprs with Prometheus's parser (promql-names, built
// beside promtool) and returns, for each, the metric names it selects or
// why it does not parse.
func promqlNames(t *testing.T, exprs []string) (names [][]string, errs []string) {
	t.Helper()
	in, err := json.Marshal(exprs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(filepath.Dir(testenv.Promtool(t)), "promql-names"))
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if exit := (*exec.ExitError)(nil); err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 1) {
		t.Fatalf("promql-names (run `make tools` if it is missing): %v: %s", err, stderr.String())
	}
	var results []struct {
		Names []string `json:"names"`
		Error string   `json:"error"`
	}
	if err := json.Unmarshal(out, &results); err != nil || len(results) != len(exprs) {
		t.Fatalf("promql-names answered %q (%v) for %d expressions", out, err, len(exprs))
	}
	for _, r := range results {
		names, errs = append(names, r.Names), append(errs, r.Error)
	}
	return names, errs
}
