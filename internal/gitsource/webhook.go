package gitsource

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// MaxWebhookBody is the largest webhook body read. GitHub caps payloads at
// 25 MB, but a push or pull_request payload of a plans repository is a few
// kilobytes; reading more would only help someone fill our memory.
const MaxWebhookBody = 1 << 20

// WebhookHandler returns the handler for a GitHub webhook of the plans
// repository: ForgeWebhookHandler(GitHubWebhooks, secret, trigger).
func WebhookHandler(secret []byte, trigger func()) http.Handler {
	return ForgeWebhookHandler(GitHubWebhooks, secret, trigger)
}

// WebhookDialect is how a forge signs its webhook deliveries and names
// their events.
type WebhookDialect struct {
	// Name names the forge in answers.
	Name string
	// SignatureHeader carries the hex HMAC-SHA256 of the body, after
	// SignaturePrefix.
	SignatureHeader, SignaturePrefix string
	// EventHeader names the event.
	EventHeader string
}

// The dialects of the forges ferry knows. Gitea also sends GitHub's
// headers, so a GitHub receiver accepts Gitea's deliveries; a Gitea
// receiver reads Gitea's headers only, and refuses a delivery signed the
// GitHub way alone.
var (
	GitHubWebhooks = WebhookDialect{Name: "GitHub", SignatureHeader: "X-Hub-Signature-256", SignaturePrefix: "sha256=", EventHeader: "X-GitHub-Event"}
	GiteaWebhooks  = WebhookDialect{Name: "Gitea", SignatureHeader: "X-Gitea-Signature", EventHeader: "X-Gitea-Event"}
)

// ForgeWebhookHandler returns the handler for a webhook of the plans
// repository on the forge that speaks dialect. A push, pull_request or
// issue_comment event whose signature header holds the HMAC-SHA256 of the
// body under secret calls trigger and is answered 202 Accepted. The
// payload is not read beyond the signature check: the event only says
// "poll now", and the poll decides what changed, so a forged or replayed
// event can cost at most one early poll.
//
// Answers: 405 for a method other than POST, 413 for a body over
// MaxWebhookBody, 401 for a missing or wrong signature, 204 for other
// events (ping included), which are ignored. With an empty secret every
// request is refused with 401, since anyone could sign with it.
//
// trigger must not block: the handler runs in the HTTP server. Pass
// (*Trigger).Fire.
func ForgeWebhookHandler(dialect WebhookDialect, secret []byte, trigger func()) http.Handler {
	return &webhook{dialect: dialect, secret: append([]byte(nil), secret...), trigger: trigger}
}

type webhook struct {
	dialect WebhookDialect
	secret  []byte
	trigger func()
}

// Events that mean the plans or the commands on them may have changed: a
// push to any branch, a pull request opened, updated or merged, a comment
// on a pull request (Gitea and GitHub both name it issue_comment).
var webhookEvents = map[string]bool{"push": true, "pull_request": true, "issue_comment": true}

func (h *webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.ContentLength > MaxWebhookBody {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxWebhookBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	case err != nil:
		http.Error(w, "cannot read body", http.StatusBadRequest)
		return
	}
	// The signature is checked before the event type, so that a caller
	// without the secret learns nothing about what is accepted.
	if !h.signed(r.Header.Get(h.dialect.SignatureHeader), body) {
		http.Error(w, "missing or wrong "+h.dialect.SignatureHeader, http.StatusUnauthorized)
		return
	}
	if !webhookEvents[r.Header.Get(h.dialect.EventHeader)] {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	h.trigger()
	w.WriteHeader(http.StatusAccepted)
}

// signed reports whether header is the dialect's prefix and the hex
// HMAC-SHA256 of body under the secret, compared in constant time.
func (h *webhook) signed(header string, body []byte) bool {
	if len(h.secret) == 0 || header == "" {
		return false
	}
	sig, ok := strings.CutPrefix(header, h.dialect.SignaturePrefix)
	if !ok {
		return false
	}
	got, err := hex.DecodeString(sig)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, h.secret)
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

// ReadWebhookSecret reads the webhook secret from a file, trimmed of
// surrounding white space (a trailing newline is the usual accident). An
// empty secret is an error: it would let anyone sign.
func ReadWebhookSecret(file string) ([]byte, error) {
	s, err := readSecret(file)
	if err != nil {
		return nil, fmt.Errorf("read webhook secret: %w", err)
	}
	return []byte(s), nil
}

// Trigger coalesces requests for an early poll: any number of Fires
// before the poll loop looks leave one pending request, and Fire never
// blocks.
//
//	for {
//		select {
//		case <-ticker.C:
//		case <-trigger.C():
//		case <-ctx.Done():
//			return
//		}
//		src.Poll(ctx)
//	}
type Trigger struct {
	c chan struct{}
}

// NewTrigger returns a Trigger with no request pending.
func NewTrigger() *Trigger { return &Trigger{c: make(chan struct{}, 1)} }

// Fire requests an early poll.
func (t *Trigger) Fire() {
	select {
	case t.c <- struct{}{}:
	default:
		// A request is already pending; the poll it causes will see
		// this change too.
	}
}

// C receives when a poll was requested.
func (t *Trigger) C() <-chan struct{} { return t.c }
