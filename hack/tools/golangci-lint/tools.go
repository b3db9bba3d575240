//go:build tools

// Package tools records golangci-lint, which hack/tools.sh builds from
// this module, so that go mod tidy keeps what it needs.
package tools

import (
	_ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
)
