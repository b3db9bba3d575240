package app

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestApprovalsWarning: a reconciler without a forge, or with
// --allow-push-approvals, says at start that approvals are not verified
// with a forge; one with a forge and only merged pull requests says
// nothing of the kind.
func TestApprovalsWarning(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		forge Forge
		want  string
	}{
		{"no forge", Forge{}, "approvals are not verified with a forge (no --forge-repo)"},
		{"pushed approvals allowed", Forge{Repo: "acme/migrations", TokenFile: token, AllowPushApprovals: true}, "not verified with the forge (--allow-push-approvals)"},
		{"a forge", Forge{Repo: "acme/migrations", TokenFile: token}, ""},
	} {
		var logs bytes.Buffer
		f, err := tc.forge.open(slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		f.close(t.Context())
		warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "not verified")
		if tc.want == "" && warned {
			t.Errorf("%s: warned %q; want no warning", tc.name, logs.String())
		}
		if tc.want != "" && (!warned || !strings.Contains(logs.String(), tc.want)) {
			t.Errorf("%s: logged %q; want a warning saying %q", tc.name, logs.String(), tc.want)
		}
	}
}

// TestWebhookServerTimeouts: the webhook server bounds reading a request,
// writing the answer and an idle connection, so that a slow or silent
// client cannot hold connections for good.
func TestWebhookServerTimeouts(t *testing.T) {
	srv := webhookServer(nil)
	for name, d := range map[string]time.Duration{"ReadHeaderTimeout": srv.ReadHeaderTimeout, "ReadTimeout": srv.ReadTimeout, "WriteTimeout": srv.WriteTimeout, "IdleTimeout": srv.IdleTimeout} {
		if d <= 0 {
			t.Errorf("%s is %s; want a bound", name, d)
		}
	}
}
