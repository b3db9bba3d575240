package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{args: nil, wantCode: 2, wantStderr: "Usage:\n  reconciler [flags]\n  reconciler [command]"},
		{args: []string{"help"}, wantCode: 0, wantStdout: "version"},
		{args: []string{"--help"}, wantCode: 0, wantStdout: "completion"},
		{args: []string{"frobnicate"}, wantCode: 2, wantStderr: `unknown command "frobnicate"`},
		{args: []string{"version"}, wantCode: 0, wantStdout: "ferry reconciler "},
		{args: []string{"version", "--bogus"}, wantCode: 2, wantStderr: "reconciler version: unknown flag: --bogus\nRun 'reconciler version --help' for usage.\n"},
		{args: []string{"version", "extra"}, wantCode: 2, wantStderr: `unknown command "extra"`},
		{args: []string{"version", "-o", "xml"}, wantCode: 2, wantStderr: `-o "xml": want text, json or yaml`},
		{args: []string{"run"}, wantCode: 2, wantStderr: "--repo is required"},
		{args: []string{"run", "--repo", "file:///x", "--webhook-addr", ":0"}, wantCode: 2, wantStderr: "--webhook-secret-file is required with --webhook-addr"},
		{args: []string{"run", "--repo", "file:///x", "--interval", "soon"}, wantCode: 2, wantStderr: `invalid argument "soon" for "--interval"`},
		{args: []string{"status", "--repo"}, wantCode: 2, wantStderr: "flag needs an argument: --repo"},
		{args: []string{"plan", "a.yaml", "b.yaml"}, wantCode: 2, wantStderr: "name one plan file"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != tc.wantCode || !strings.Contains(stdout.String(), tc.wantStdout) || !strings.Contains(stderr.String(), tc.wantStderr) {
			t.Errorf("run(%q) = %d, stdout %q, stderr %q; want %d, stdout containing %q, stderr containing %q",
				tc.args, code, stdout.String(), stderr.String(), tc.wantCode, tc.wantStdout, tc.wantStderr)
		}
	}
}
