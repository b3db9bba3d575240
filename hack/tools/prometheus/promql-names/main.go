// Command promql-names parses PromQL expressions with Prometheus's own
// parser and prints the metric names each one selects, so that a test
// outside this module (deploy/monitoring's) can check that alerts and
// dashboards ask only for metrics that exist, without the main module
// requiring Prometheus (whose Kubernetes modules would not match
// controller-runtime's).
//
// It reads a JSON array of expressions on standard input and writes a JSON
// array with one object per expression, in order: {"names": [...]} or
// {"error": "..."} for an expression that does not parse or that selects
// metrics other than by an exact name (a regular expression on __name__
// would hide a misspelling). It exits 1 when any expression has an error,
// 2 when its input is not a JSON array of strings. With --version it
// prints the version hack/tools.sh built it as (a hash of this file, so
// that a change to it is rebuilt).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// result is what is printed for one expression.
type result struct {
	Names []string `json:"names,omitempty"`
	Error string   `json:"error,omitempty"`
}

// version is set by hack/tools.sh.
var version = "dev"

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println(version)
		return
	}
	var exprs []string
	if err := json.NewDecoder(os.Stdin).Decode(&exprs); err != nil {
		fmt.Fprintf(os.Stderr, "promql-names: standard input: %v\n", err)
		os.Exit(2)
	}
	p := parser.NewParser(parser.Options{})
	results := make([]result, len(exprs))
	failed := false
	for i, e := range exprs {
		names, err := selected(p, e)
		if err != nil {
			results[i].Error, failed = err.Error(), true
			continue
		}
		results[i].Names = names
	}
	if err := json.NewEncoder(os.Stdout).Encode(results); err != nil {
		fmt.Fprintf(os.Stderr, "promql-names: %v\n", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// selected returns the sorted, distinct metric names expr selects.
func selected(p parser.Parser, expr string) ([]string, error) {
	parsed, err := p.ParseExpr(expr)
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", expr, err)
	}
	var names []string
	for _, matchers := range parser.ExtractSelectors(parsed) {
		name := ""
		for _, m := range matchers {
			if m.Name != labels.MetricName {
				continue
			}
			if m.Type != labels.MatchEqual {
				return nil, fmt.Errorf("%q selects metrics by %s, not by name", expr, m)
			}
			name = m.Value
		}
		if name == "" {
			return nil, fmt.Errorf("%q has a selector without a metric name", expr)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}
