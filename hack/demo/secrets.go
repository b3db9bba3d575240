package main

import (
	"bytes"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
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

// scanner looks for secret values in texts.
type scanner struct {
	values  []string
	found   []string
	scanned int
}

// look records each value found in text, as it is or base64-encoded.
func (sc *scanner) look(where, text string) {
	sc.scanned += len(text)
	for _, v := range sc.values {
		if strings.Contains(text, v) || strings.Contains(text, base64.StdEncoding.EncodeToString([]byte(v))) {
			sc.found = append(sc.found, fmt.Sprintf("%s holds a secret value (%d bytes)", where, len(v)))
		}
	}
}

// scanWorld looks in ferry's logs, the NATS messages, every commit and
// blob of the plans repository (on the forge's disk), and the comments
// and statuses.
func (sc *scanner) scanWorld(w *world, msgs, texts []string) error {
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
