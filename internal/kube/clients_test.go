package kube

import (
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/redact"
)

// TestClientRegistersCredentials: once a client is built from a
// kubeconfig, its token is masked by redact.Scrub wherever it appears (an
// API server or a proxy may echo it in an error).
func TestClientRegistersCredentials(t *testing.T) {
	const token = "kube-test-bearer-t0ken-5ecret"
	kubeconfig := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: "` + token + `"}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`
	if _, err := WorkloadClientset([]byte(kubeconfig)); err != nil {
		t.Fatal(err)
	}
	if got := redact.Scrub("Unauthorized: Bearer " + token); strings.Contains(got, token) {
		t.Errorf("Scrub = %q; want the token masked", got)
	}
}
