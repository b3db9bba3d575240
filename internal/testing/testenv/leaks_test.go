package testenv

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestSecretForms: a secret quoted in a longer text is found in it,
// however base64 aligned it, and a text without it holds no form of it.
func TestSecretForms(t *testing.T) {
	const v = "s3cret&pass"
	forms := SecretForms(v)
	found := func(text string) bool {
		for _, f := range forms {
			if strings.Contains(text, f) {
				return true
			}
		}
		return false
	}
	for _, prefix := range []string{"", "u", "us", "user:", "clouds:\n  password: "} {
		for _, suffix := range []string{"", "\n", "\n  project: k8s\n"} {
			if text := base64.StdEncoding.EncodeToString([]byte(prefix + v + suffix)); !found(text) {
				t.Errorf("%q in base64 %s not found", prefix+v+suffix, text)
			}
		}
	}
	for _, text := range []string{`{"password": "s3cret\u0026pass"}`, "q=s3cret%26pass", `"s3cret&pass"`} {
		if !found(text) {
			t.Errorf("not found in %s", text)
		}
	}
	if text := base64.StdEncoding.EncodeToString([]byte("user:s3cret&pas")); found(text) {
		t.Errorf("found in %s, which lacks it", text)
	}
}
