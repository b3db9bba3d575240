package main

import "testing"

func TestRun(t *testing.T) {
	for _, tc := range []cliCase{
		{args: nil, wantCode: 2, wantStderr: []string{"Usage:\n  reconciler [flags]\n  reconciler [command]"}},
		{args: []string{"help"}, wantCode: 0, wantStdout: "version"},
		{args: []string{"--help"}, wantCode: 0, wantStdout: "completion"},
		{args: []string{"frobnicate"}, wantCode: 2, wantStderr: []string{`unknown command "frobnicate"`}},
		{args: []string{"version"}, wantCode: 0, wantStdout: "ferry reconciler "},
		{args: []string{"version", "--bogus"}, wantCode: 2, wantStderr: []string{"reconciler version: unknown flag: --bogus\nRun 'reconciler version --help' for usage.\n"}},
		{args: []string{"version", "extra"}, wantCode: 2, wantStderr: []string{`unknown command "extra"`}},
		{args: []string{"version", "-o", "xml"}, wantCode: 2, wantStderr: []string{`-o "xml": want text, json or yaml`}},
		{args: []string{"run"}, wantCode: 2, wantStderr: []string{"--repo is required"}},
		{args: []string{"run", "--repo", "file:///x", "--webhook-addr", ":0"}, wantCode: 2, wantStderr: []string{"--webhook-secret-file is required with --webhook-addr"}},
		{args: []string{"run", "--repo", "file:///x", "--interval", "soon"}, wantCode: 2, wantStderr: []string{`invalid argument "soon" for "--interval"`}},
		{args: []string{"status", "--repo"}, wantCode: 2, wantStderr: []string{"flag needs an argument: --repo"}},
		{args: []string{"plan", "a.yaml", "b.yaml"}, wantCode: 2, wantStderr: []string{"name one plan file"}},
	} {
		tc.check(t)
	}
}
