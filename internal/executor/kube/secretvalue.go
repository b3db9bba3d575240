package kube

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/step"
)

// The target keys whose values copy-secret checks: the planner's
// identity copy (internal/planner, identitySecret) writes the cloud's
// clouds.yaml and CA certificate under these names, which CAPO reads.
const (
	keyCloudsYAML = "clouds.yaml"
	keyCACert     = "cacert"
)

// checkCopies checks that each value about to be copied is what its target
// key says it is: a clouds.yaml under clouds.yaml, PEM certificates under
// cacert. A plan names the source Secret and key, and a wrong key (or a
// Secret that holds a token, say ferry's own) would otherwise copy that
// value into a Secret the cluster's namespace can read. A mismatch is
// terminal, and its error names the source and key, never the value, nor
// the parser's message, which may quote it.
func checkCopies(s *job, from string, src map[string][]byte, keys []step.KeyCopy) error {
	for _, k := range keys {
		var expected string
		switch k.Dst {
		case keyCloudsYAML:
			if !isCloudsYAML(src[k.Src]) {
				expected = "a clouds.yaml: YAML with a non-empty top-level clouds map, each cloud a map (auth, region_name, …)"
			}
		case keyCACert:
			if !isPEMCertificates(src[k.Src]) {
				expected = "PEM CA certificates: one or more CERTIFICATE blocks and nothing else"
			}
		}
		if expected != "" {
			return failure.Terminal(fmt.Errorf("copy %s to %s: key %q of the source, copied as %s, is not %s; nothing copied: "+
				"name the key that holds it, or a Secret that holds it, in the plan", from, s.target(), k.Src, k.Dst, expected))
		}
	}
	return nil
}

// isCloudsYAML reports whether data parses as a clouds.yaml: a top-level
// clouds map with at least one cloud, each a map. That is the shape
// gophercloud's clouds reader and CAPO take; what is in each cloud is for
// them to judge.
func isCloudsYAML(data []byte) bool {
	var doc struct {
		Clouds map[string]any `json:"clouds"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Clouds) == 0 {
		return false
	}
	for _, cloud := range doc.Clouds {
		if _, ok := cloud.(map[string]any); !ok {
			return false
		}
	}
	return true
}

// isPEMCertificates reports whether data is one or more PEM CERTIFICATE
// blocks, each an X.509 certificate, with only white space around them.
// Text outside the blocks is refused rather than skipped, as pem.Decode
// would: it would be copied with them, and it is no certificate.
func isPEMCertificates(data []byte) bool {
	rest := bytes.TrimSpace(data)
	if len(rest) == 0 {
		return false
	}
	for len(rest) > 0 {
		if !bytes.HasPrefix(rest, []byte("-----BEGIN ")) {
			return false
		}
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil || block.Type != "CERTIFICATE" || len(block.Headers) > 0 {
			return false
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return false
		}
		rest = bytes.TrimSpace(rest)
	}
	return true
}
