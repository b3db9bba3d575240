package gitsource_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ferry-dev/ferry/internal/gitsource"
)

func sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// TestWebhook sends deliveries to a real HTTP server running the handler.
func TestWebhook(t *testing.T) {
	secret := []byte("webhook-secret")
	body := []byte(`{"ref":"refs/heads/main","after":"0123"}`)
	big := bytes.Repeat([]byte("x"), gitsource.MaxWebhookBody+1)
	for _, tc := range []struct {
		name      string
		method    string
		event     string
		signature string
		body      []byte
		chunked   bool // no Content-Length: the limit must hold while reading
		status    int
		triggered bool
	}{
		{name: "push", event: "push", signature: sign(secret, body), body: body, status: http.StatusAccepted, triggered: true},
		{name: "pull request", event: "pull_request", signature: sign(secret, body), body: body, status: http.StatusAccepted, triggered: true},
		{name: "wrong signature", event: "push", signature: sign([]byte("other"), body), body: body, status: http.StatusUnauthorized},
		{name: "signature of another body", event: "push", signature: sign(secret, []byte("{}")), body: body, status: http.StatusUnauthorized},
		{name: "no signature", event: "push", body: body, status: http.StatusUnauthorized},
		{name: "sha1 signature", event: "push", signature: "sha1=" + strings.Repeat("0", 40), body: body, status: http.StatusUnauthorized},
		{name: "not hex", event: "push", signature: "sha256=zz", body: body, status: http.StatusUnauthorized},
		{name: "unknown event", event: "issues", signature: sign(secret, body), body: body, status: http.StatusNoContent},
		{name: "ping", event: "ping", signature: sign(secret, body), body: body, status: http.StatusNoContent},
		{name: "unknown event, unsigned", event: "issues", body: body, status: http.StatusUnauthorized},
		{name: "oversized", event: "push", signature: sign(secret, big), body: big, status: http.StatusRequestEntityTooLarge},
		{name: "oversized, chunked", event: "push", signature: sign(secret, big), body: big, chunked: true, status: http.StatusRequestEntityTooLarge},
		{name: "GET", method: http.MethodGet, event: "push", status: http.StatusMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Atomic: the handler runs on the server's goroutine.
			var calls atomic.Int32
			srv := httptest.NewServer(gitsource.WebhookHandler(secret, func() { calls.Add(1) }))
			defer srv.Close()
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			req, err := http.NewRequestWithContext(t.Context(), method, srv.URL, bytes.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.chunked {
				req.ContentLength = -1
				req.Body = readCloser{bytes.NewReader(tc.body)}
			}
			req.Header.Set("X-GitHub-Event", tc.event)
			if tc.signature != "" {
				req.Header.Set("X-Hub-Signature-256", tc.signature)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("status %d; want %d", resp.StatusCode, tc.status)
			}
			var want int32
			if tc.triggered {
				want = 1
			}
			if got := calls.Load(); got != want {
				t.Errorf("trigger called %d times; want %d", got, want)
			}
		})
	}
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// TestWebhookEmptySecret refuses everything: an empty key signs for anyone.
func TestWebhookEmptySecret(t *testing.T) {
	called := false
	h := gitsource.WebhookHandler(nil, func() { called = true })
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}"))
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-Hub-Signature-256", sign(nil, []byte("{}")))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized || called {
		t.Fatalf("status %d, triggered %v; want 401, not triggered", rec.Code, called)
	}
}

// TestWebhookDialects: each receiver reads its own forge's headers, and a
// delivery signed only the other forge's way is refused. (The real Gitea's
// deliveries are tested in internal/testing/testenv.)
func TestWebhookDialects(t *testing.T) {
	secret := []byte("webhook-secret")
	body := []byte(`{"ref":"refs/heads/main"}`)
	hexSig := strings.TrimPrefix(sign(secret, body), "sha256=")
	for _, tc := range []struct {
		name    string
		dialect gitsource.WebhookDialect
		headers map[string]string
		status  int
	}{
		{"gitea push", gitsource.GiteaWebhooks, map[string]string{"X-Gitea-Event": "push", "X-Gitea-Signature": hexSig}, http.StatusAccepted},
		{"gitea comment", gitsource.GiteaWebhooks, map[string]string{"X-Gitea-Event": "issue_comment", "X-Gitea-Signature": hexSig}, http.StatusAccepted},
		{"gitea, GitHub's signature only", gitsource.GiteaWebhooks, map[string]string{"X-Gitea-Event": "push", "X-Hub-Signature-256": sign(secret, body)}, http.StatusUnauthorized},
		{"gitea, prefixed signature", gitsource.GiteaWebhooks, map[string]string{"X-Gitea-Event": "push", "X-Gitea-Signature": sign(secret, body)}, http.StatusUnauthorized},
		{"gitea, wrong secret", gitsource.GiteaWebhooks, map[string]string{"X-Gitea-Event": "push", "X-Gitea-Signature": strings.TrimPrefix(sign([]byte("other"), body), "sha256=")}, http.StatusUnauthorized},
		{"gitea, GitHub's event header", gitsource.GiteaWebhooks, map[string]string{"X-GitHub-Event": "push", "X-Gitea-Signature": hexSig}, http.StatusNoContent},
		{"gitea, issues", gitsource.GiteaWebhooks, map[string]string{"X-Gitea-Event": "issues", "X-Gitea-Signature": hexSig}, http.StatusNoContent},
		{"github comment", gitsource.GitHubWebhooks, map[string]string{"X-GitHub-Event": "issue_comment", "X-Hub-Signature-256": sign(secret, body)}, http.StatusAccepted},
		{"github, Gitea's signature only", gitsource.GitHubWebhooks, map[string]string{"X-GitHub-Event": "push", "X-Gitea-Signature": hexSig}, http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			called := false
			h := gitsource.ForgeWebhookHandler(tc.dialect, secret, func() { called = true })
			req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status || called != (tc.status == http.StatusAccepted) {
				t.Errorf("status %d, triggered %v; want %d", rec.Code, called, tc.status)
			}
		})
	}
}

// TestTrigger coalesces fires while a poll is pending, and never blocks.
func TestTrigger(t *testing.T) {
	tr := gitsource.NewTrigger()
	select {
	case <-tr.C():
		t.Fatal("a new trigger is pending")
	default:
	}
	for range 3 {
		tr.Fire()
	}
	<-tr.C()
	select {
	case <-tr.C():
		t.Fatal("three fires left more than one pending poll")
	default:
	}
}

// TestReadWebhookSecret trims the file and refuses an empty one.
func TestReadWebhookSecret(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content, want string
		ok                  bool
	}{
		{"trailing newline", "s3cret\n", "s3cret", true},
		{"spaces", "  s3cret \r\n", "s3cret", true},
		{"empty", "\n", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := gitsource.ReadWebhookSecret(p)
			if (err == nil) != tc.ok || string(got) != tc.want {
				t.Fatalf("ReadWebhookSecret = %q, %v; want %q, ok %v", got, err, tc.want, tc.ok)
			}
		})
	}
	if _, err := gitsource.ReadWebhookSecret(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing file read")
	}
}
