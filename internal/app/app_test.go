package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/events"
)

func TestWrite(t *testing.T) {
	v := struct {
		Name  string `json:"name"`
		Steps int    `json:"steps,omitempty"`
	}{Name: "capi-quickstart", Steps: 3}
	text := func(w io.Writer) error { _, err := fmt.Fprintf(w, "%s: %d steps\n", v.Name, v.Steps); return err }
	for _, tc := range []struct{ format, want string }{
		{OutputText, "capi-quickstart: 3 steps\n"},
		{OutputJSON, "{\n  \"name\": \"capi-quickstart\",\n  \"steps\": 3\n}\n"},
		{OutputYAML, "name: capi-quickstart\nsteps: 3\n"},
	} {
		var out bytes.Buffer
		if err := checkOutput(tc.format); err != nil {
			t.Errorf("checkOutput(%q) = %v", tc.format, err)
		}
		if err := write(&out, tc.format, v, text); err != nil || out.String() != tc.want {
			t.Errorf("write -o %s = %q, %v; want %q", tc.format, out.String(), err, tc.want)
		}
	}
	if err := checkOutput("xml"); !IsUsageError(err) {
		t.Errorf("checkOutput(xml) = %v; want a UsageError", err)
	}
}

func TestUsageErrors(t *testing.T) {
	owners := filepath.Join(t.TempDir(), "owners")
	if err := os.WriteFile(owners, []byte("plans/** @acme/platform\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	team := Run(t.Context(), RunConfig{Git: Git{URL: "file:///x"}, Forge: Forge{Repo: "acme/plans", OwnersFile: owners}})
	if want := owners + ":1: owner \"@acme/platform\": GitHub teams are not supported"; team == nil || !strings.Contains(team.Error(), want) {
		t.Errorf("a team in --owners-file: %v; want %q", team, want)
	}
	for name, err := range map[string]error{
		"run, owners without forge":   Run(t.Context(), RunConfig{Git: Git{URL: "file:///x"}, Forge: Forge{OwnersFile: owners}}),
		"run, a team as an owner":     team,
		"run without --repo":          Run(t.Context(), RunConfig{}),
		"run, webhook without secret": Run(t.Context(), RunConfig{Git: Git{URL: "file:///x"}, WebhookAddr: ":0"}),
		"executor without NATS":       Executor(t.Context(), ExecutorConfig{}),
		"executor, unknown kind":      Executor(t.Context(), ExecutorConfig{NATS: events.BusOptions{URL: "nats://x"}, Executors: Executors{Kinds: []string{"teleport"}}}),
		"status without --repo":       Status(t.Context(), StatusConfig{Output: OutputText}),
		"validate nothing":            Validate(t.Context(), ValidateConfig{}),
		"validate a missing file":     Validate(t.Context(), ValidateConfig{Paths: []string{"missing.yaml"}, Output: OutputText}),
		"version -o xml":              Version(t.Context(), VersionConfig{Output: "xml"}),
	} {
		var u *UsageError
		if !errors.As(err, &u) {
			t.Errorf("%s: %v; want a UsageError", name, err)
		}
	}
}

// TestLogger: --log-format json writes one JSON object per line, and
// --log-level drops what is below it.
func TestLogger(t *testing.T) {
	var out bytes.Buffer
	level, err := ParseLog("warn", LogJSON)
	if err != nil {
		t.Fatal(err)
	}
	log := Streams{ErrOut: &out, LogLevel: level, LogFormat: LogJSON}.logger()
	log.Info("reconciling", "repo", "file:///plans")
	log.Warn("no result for a published step", "step_id", "s1")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var got map[string]any
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &got) != nil || got["level"] != "WARN" || got["step_id"] != "s1" {
		t.Errorf("log at warn, as JSON:\n%s\nwant the one warning as a JSON object", out.String())
	}
	out.Reset()
	Streams{ErrOut: &out}.logger().Info("reconciling")
	if !strings.HasPrefix(out.String(), "time=") || !strings.Contains(out.String(), "level=INFO") {
		t.Errorf("the default log is text at info: %q", out.String())
	}
	for _, bad := range [][2]string{{"loud", LogText}, {"info", "xml"}} {
		if _, err := ParseLog(bad[0], bad[1]); !IsUsageError(err) {
			t.Errorf("ParseLog(%q, %q) = %v; want a usage error", bad[0], bad[1], err)
		}
	}
}
