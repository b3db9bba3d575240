//go:build tools

// Package tools records promtool, which hack/tools.sh builds from this
// module beside promql-names, so that go mod tidy keeps what it needs.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
