package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// secretValues are the strings a run must never let out: every Secret
// value but certificates, the private keys and tokens inside kubeconfigs,
// and the extra values given (tokens, passwords).
func secretValues(secrets []corev1.Secret, extra ...string) []string {
	var out []string
	add := func(v string) {
		v = strings.TrimSpace(v)
		if len(v) >= 8 {
			out = append(out, v)
		}
	}
	for _, v := range extra {
		add(v)
	}
	for _, s := range secrets {
		for key, data := range s.Data {
			// A bootstrap data Secret's format ("cloud-config") names
			// the format of its value, which is looked for.
			if strings.HasSuffix(key, ".crt") || strings.HasSuffix(key, ".pub") || key == "cacert" || key == "ca.crt" || key == "format" {
				continue
			}
			if cfg, err := clientcmd.Load(data); err == nil && len(cfg.AuthInfos) > 0 {
				for _, ai := range cfg.AuthInfos {
					add(string(ai.ClientKeyData))
					add(pemBody(ai.ClientKeyData))
					add(ai.Token)
					add(ai.Password)
				}
				continue
			}
			if block, _ := pem.Decode(data); block != nil {
				if block.Type != "CERTIFICATE" {
					add(pemBody(data))
				}
				continue
			}
			for _, line := range strings.Split(string(data), "\n") {
				// clouds.yaml: the password and application credential
				// secret.
				if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && (strings.Contains(k, "password") || strings.Contains(k, "secret")) {
					add(strings.Trim(strings.TrimSpace(v), `"'`))
				}
			}
			if !bytes.Contains(data, []byte("\n")) {
				add(string(data))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// pemBody is the first line of a PEM block's base64 body: unique to the
// key, and what a log that printed the key would hold.
func pemBody(data []byte) string {
	lines := strings.Split(string(data), "\n")
	if len(lines) > 1 {
		return lines[1]
	}
	return ""
}

// plantAppCredential adds to the clouds.yaml of the identity Secret key a
// cloud that authenticates with an application credential, and returns
// the credential's secret: the fixture's clouds.yaml has a password only,
// and a run must let out neither kind of cloud credential. ferry reads
// every cloud of the document (internal/openstack registers the secrets
// of all of them); CAPO and the plan use their own cloud only, and this
// one is never authenticated with.
func plantAppCredential(ctx context.Context, c client.Client, key client.ObjectKey) (string, error) {
	var sec corev1.Secret
	if err := c.Get(ctx, key, &sec); err != nil {
		return "", fmt.Errorf("read the identity Secret %s: %w", key, err)
	}
	var doc struct {
		Clouds map[string]any `json:"clouds"`
	}
	// Not the parser's message: it may quote the document.
	if yaml.Unmarshal(sec.Data["clouds.yaml"], &doc) != nil || doc.Clouds == nil {
		return "", fmt.Errorf("the identity Secret %s holds no clouds.yaml", key)
	}
	// The same Keystone as the Secret's own cloud.
	var authURL any
	for _, c := range doc.Clouds {
		if c, ok := c.(map[string]any); ok {
			if auth, ok := c["auth"].(map[string]any); ok && auth["auth_url"] != nil {
				authURL = auth["auth_url"]
			}
		}
	}
	if authURL == nil {
		return "", fmt.Errorf("the identity Secret %s's clouds.yaml names no auth_url", key)
	}
	secret := "demo-appcred-secret-" + randomHex(12)
	doc.Clouds["demo-application-credential"] = map[string]any{
		"auth_type": "v3applicationcredential",
		"auth": map[string]any{
			"auth_url":                      authURL,
			"application_credential_id":     "demo-" + randomHex(8),
			"application_credential_secret": secret,
		},
		"region_name": "RegionOne",
	}
	data, err := yaml.Marshal(doc)
	if err != nil {
		return "", err
	}
	sec.Data["clouds.yaml"] = data
	if err := c.Update(ctx, &sec); err != nil {
		return "", fmt.Errorf("plant an application credential in the identity Secret %s: %w", key, err)
	}
	return secret, nil
}

// scanner looks for secret values in texts.
type scanner struct {
	values  []string
	found   []string
	scanned int
}

// look records each value found in text, as it is or in a form it takes
// once quoted (testenv.SecretForms: JSON, a URL's query or path, base64
// at any alignment, as in a Kubernetes object's data or a basic-auth
// header).
func (sc *scanner) look(where, text string) {
	sc.scanned += len(text)
	for _, v := range sc.values {
		for _, form := range testenv.SecretForms(v) {
			if strings.Contains(text, form) {
				sc.found = append(sc.found, fmt.Sprintf("%s holds a secret value (%d bytes)", where, len(v)))
				break
			}
		}
	}
}

// scanWorld looks in ferry's logs, the NATS messages, the comments and
// statuses (texts), the Events in the management cluster, what each
// reconciler serves on its metrics address (/metrics, /healthz, /readyz),
// and every commit and blob of the plans repository (on the forge's disk:
// the status branch and its history with the rest).
func (sc *scanner) scanWorld(ctx context.Context, w *world, msgs, texts []string) error {
	look := sc.look
	logs, err := filepath.Glob(filepath.Join(w.logDir, "*.log"))
	if err != nil {
		return err
	}
	for _, path := range logs {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		look(path, string(data))
	}
	for i, m := range msgs {
		look(fmt.Sprintf("NATS message %d", i), m)
	}
	for i, t := range texts {
		look(fmt.Sprintf("comment or status %d", i), t)
	}
	var events corev1.EventList
	if err := w.fx.cloud.Mgmt.Client.List(ctx, &events); err != nil {
		return fmt.Errorf("list the Events: %w", err)
	}
	for _, e := range events.Items {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		look("Event "+e.Namespace+"/"+e.Name, string(b))
	}
	for where, text := range w.served(ctx) {
		look(where, text)
	}
	repo, err := git.PlainOpen(w.forge.repoDir())
	if err != nil {
		return err
	}
	commits, err := repo.CommitObjects()
	if err != nil {
		return err
	}
	if err := commits.ForEach(func(c *object.Commit) error {
		look("commit "+c.Hash.String()[:10], c.Message)
		return nil
	}); err != nil {
		return err
	}
	blobs, err := repo.BlobObjects()
	if err != nil {
		return err
	}
	return blobs.ForEach(func(b *object.Blob) error {
		r, err := b.Reader()
		if err != nil {
			return err
		}
		defer r.Close()
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(r); err != nil {
			return err
		}
		look("blob "+b.Hash.String()[:10], buf.String())
		return nil
	})
}

// served is what each reconciler that answers serves on its metrics
// address, by URL: the metrics' labels and /healthz's reasons are text
// from the loop too. One that does not answer (stopped by the run) shows
// nothing to anyone.
func (w *world) served(ctx context.Context) map[string]string {
	out := map[string]string{}
	for _, name := range w.layout.reconcilers() {
		w.mu.Lock()
		addr := w.procs[name].metrics
		w.mu.Unlock()
		for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
			u := "http://" + addr + path
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			if err != nil {
				continue
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				continue
			}
			body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
			resp.Body.Close()
			if err == nil {
				out[u] = string(body)
			}
		}
	}
	return out
}
