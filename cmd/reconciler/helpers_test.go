package main

import (
	"bytes"
	"strings"
	"testing"
)

// cliCase is a command line and what it must do: its exit code, text its
// stdout contains, and texts its stderr contains.
type cliCase struct {
	args       []string
	wantCode   int
	wantStdout string
	wantStderr []string
}

// check runs the command line and reports what differs from the case.
func (tc cliCase) check(t *testing.T) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(tc.args, &stdout, &stderr)
	ok := code == tc.wantCode && strings.Contains(stdout.String(), tc.wantStdout)
	for _, want := range tc.wantStderr {
		ok = ok && strings.Contains(stderr.String(), want)
	}
	if !ok {
		t.Errorf("run(%q) = %d\nstdout: %s\nstderr: %s\nwant %d, stdout containing %q, stderr containing %q",
			tc.args, code, stdout.String(), stderr.String(), tc.wantCode, tc.wantStdout, tc.wantStderr)
	}
}
