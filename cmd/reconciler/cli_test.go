package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/ferry-dev/ferry/internal/app"
)

// commandNames are the commands of reconciler, besides help and completion.
var commandNames = []string{"run", "executor", "plan", "status", "validate", "version"}

// TestHelp: every command's --help has its usage, an example and its
// flags in the --double-dash form, on stdout, exiting 0.
func TestHelp(t *testing.T) {
	for _, name := range commandNames {
		var stdout, stderr bytes.Buffer
		if code := run([]string{name, "--help"}, &stdout, &stderr); code != 0 || stderr.Len() != 0 {
			t.Errorf("%s --help = %d, stderr %q; want 0 and nothing", name, code, stderr.String())
		}
		help := stdout.String()
		for _, want := range []string{"Usage:\n  reconciler " + name, "Examples:\n  ", "  reconciler " + name, "Flags:\n", "  -h, --help "} {
			if !strings.Contains(help, want) {
				t.Errorf("reconciler %s --help lacks %q:\n%s", name, want, help)
			}
		}
		// Old single-dash forms still ask for help.
		var old bytes.Buffer
		if code := run([]string{name, "-help"}, &old, &bytes.Buffer{}); code != 0 || old.String() != help {
			t.Errorf("%s -help = %d; want 0 and the --help text", name, code)
		}
	}
}

// TestCompletion: cobra's completion scripts for bash, zsh and fish, and
// the values offered for -o and --kinds.
func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "__start_reconciler", "zsh": "#compdef reconciler", "fish": "complete -c reconciler",
	} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{"completion", shell}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), want) {
			t.Errorf("completion %s = %d, stderr %q; want 0 and a script containing %q", shell, code, stderr.String(), want)
		}
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", ""}, commandNames},
		{[]string{"__complete", "status", "-o", ""}, app.Outputs},
		{[]string{"__complete", "executor", "--kinds", ""}, app.Kinds},
		{[]string{"__complete", "run", "--nats-"}, []string{"--nats-url", "--nats-creds"}},
	} {
		var stdout bytes.Buffer
		if code := run(tc.args, &stdout, &bytes.Buffer{}); code != 0 {
			t.Errorf("%q exited %d", tc.args, code)
		}
		for _, w := range tc.want {
			if !strings.Contains(stdout.String(), w+"\n") && !strings.Contains(stdout.String(), w+"\t") {
				t.Errorf("%q offers\n%s\nwant %q among them", tc.args, stdout.String(), w)
			}
		}
	}
}

// TestVersionOutput: -o json and -o yaml print the same fields.
func TestVersionOutput(t *testing.T) {
	var fromJSON, fromYAML app.VersionInfo
	for format, decode := range map[string]func([]byte, any) error{"json": json.Unmarshal, "yaml": func(b []byte, v any) error { return yaml.Unmarshal(b, v) }} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{"version", "-o", format}, &stdout, &stderr); code != 0 {
			t.Fatalf("version -o %s = %d: %s", format, code, stderr.String())
		}
		v := &fromJSON
		if format == "yaml" {
			v = &fromYAML
		}
		if err := decode(stdout.Bytes(), v); err != nil || !strings.HasPrefix(v.Version, "(devel)") || v.GoVersion == "" {
			t.Errorf("version -o %s = %+v (%v):\n%s", format, v, err, stdout.String())
		}
	}
	if fromJSON.Version != fromYAML.Version || len(fromJSON.Modules) != len(fromYAML.Modules) {
		t.Errorf("json %+v and yaml %+v differ", fromJSON, fromYAML)
	}
}

// TestDeprecatedSpellings: flags spelt as in earlier releases work for one
// more, with a warning on stderr: single-dash long flags (Go's flag
// package), --repo-root (now --repo-dir), --token-file (now
// --git-token-file; see TestStatusCommand for its effect).
func TestDeprecatedSpellings(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	for _, tc := range []cliCase{
		{args: []string{"version", "-output", "json"}, wantStdout: `"version": "(devel)`,
			wantStderr: []string{"Flag -output has been deprecated, use --output"}},
		{args: []string{"version", "-output=yaml"}, wantStdout: "version: (devel)",
			wantStderr: []string{"Flag -output has been deprecated"}},
		{args: []string{"executor", "-nats-url", "nats://127.0.0.1:1", "-kinds=kube,teleport"}, wantCode: 2, wantStderr: []string{
			"Flag -nats-url has been deprecated, use --nats-url", "Flag -kinds has been deprecated", `unknown executor kind "teleport"`}},
		{args: []string{"plan", missing, "--repo-root", ".", "-kubeconfig", "k"}, wantCode: 2, wantStderr: []string{
			"Flag --repo-root has been deprecated, use --repo-dir", "Flag -kubeconfig has been deprecated, use --kubeconfig", "missing.yaml"}},
		{args: []string{"status", "-repo", "file:///nowhere", "--token-file", missing, "-o", "xml"}, wantCode: 2, wantStderr: []string{
			"Flag -repo has been deprecated", "Flag --token-file has been deprecated, use --git-token-file"}},
		{args: []string{"run", "--repo", "file:///nowhere", "--github-repo", "no-slash", "--github-api-url", "https://ghe.example.com"}, wantCode: 2, wantStderr: []string{
			"Flag --github-repo has been deprecated, use --forge-repo", "Flag --github-api-url has been deprecated, use --forge-url", `--forge-repo "no-slash": want owner/name`}},
		{args: []string{"run", "--repo", "file:///nowhere", "--forge", "gitlab"}, wantCode: 2, wantStderr: []string{`--forge "gitlab": want github or gitea`}},
		{args: []string{"run", "--repo", "file:///nowhere", "--forge", "gitea", "--forge-repo", "acme/plans"}, wantCode: 2, wantStderr: []string{"--forge-url is required with --forge gitea"}},
		// After "--" nothing is a flag.
		{args: []string{"validate", "--", "-repo"}, wantCode: 2, wantStderr: []string{"-repo"}},
	} {
		tc.check(t)
	}
	// Deprecated flags stay out of help.
	var help bytes.Buffer
	run([]string{"plan", "--help"}, &help, &bytes.Buffer{})
	if strings.Contains(help.String(), "repo-root") || strings.Contains(help.String(), "token-file") {
		t.Errorf("plan --help shows a deprecated flag:\n%s", help.String())
	}
	help.Reset()
	run([]string{"run", "--help"}, &help, &bytes.Buffer{})
	if strings.Contains(help.String(), "github-") {
		t.Errorf("run --help shows a deprecated flag:\n%s", help.String())
	}
}

// TestNonPositiveFlags: an interval, timeout or concurrency of zero or
// below is a usage error naming the flag, before anything starts (a zero
// --interval used to panic in a ticker; --concurrency -1 was taken).
func TestNonPositiveFlags(t *testing.T) {
	for _, tc := range []cliCase{
		{args: []string{"run", "--repo", "file:///nowhere", "--interval", "0s"}, wantCode: 2, wantStderr: []string{"--interval must be above zero, not 0s"}},
		{args: []string{"run", "--repo", "file:///nowhere", "--interval", "-5s"}, wantCode: 2, wantStderr: []string{"--interval must be above zero, not -5s"}},
		{args: []string{"run", "--repo", "file:///nowhere", "--timeout", "0s"}, wantCode: 2, wantStderr: []string{"--timeout must be above zero"}},
		{args: []string{"run", "--repo", "file:///nowhere", "--comment-interval", "-1s"}, wantCode: 2, wantStderr: []string{"--comment-interval must be above zero"}},
		{args: []string{"executor", "--nats-url", "nats://127.0.0.1:1", "--concurrency", "-1"}, wantCode: 2, wantStderr: []string{"--concurrency must be above zero, not -1"}},
		{args: []string{"status", "--repo", "file:///nowhere", "--git-timeout", "0s"}, wantCode: 2, wantStderr: []string{"--git-timeout must be above zero"}},
		{args: []string{"version", "--log-level", "loud"}, wantCode: 2, wantStderr: []string{`--log-level "loud": want debug, info, warn or error`}},
		{args: []string{"status", "--repo", "file:///nowhere", "--log-format", "xml"}, wantCode: 2, wantStderr: []string{`--log-format "xml": want text or json`}},
	} {
		tc.check(t)
	}
}
