// Webhooks, delivered and signed the way GitHub does.

package fakegithub

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Deliver posts a webhook to url as GitHub does: event in X-GitHub-Event,
// the JSON payload signed with secret in X-Hub-Signature-256. It returns
// the answer's status code.
func Deliver(ctx context.Context, url string, secret []byte, event string, payload any) (int, error) {
	body, err := json.Marshal(payload)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", strconv.FormatInt(time.Now().UnixNano(), 16))
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// PullRequestEvent is the payload of a pull_request webhook for pull
// request n with action ("opened", "synchronize", "closed").
func (f *Server) PullRequestEvent(n int, action string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pulls[n]
	if !ok {
		return map[string]any{"action": action, "number": n}
	}
	return map[string]any{"action": action, "number": n, "pull_request": f.pullJSON(p, true),
		"repository": map[string]any{"name": f.Repo, "full_name": f.Owner + "/" + f.Repo}, "sender": f.user("alice")}
}
