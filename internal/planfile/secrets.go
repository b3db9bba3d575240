package planfile

import (
	"net/url"
	"strings"
)

// inlineSecretMsg is the error for a secret value written into a plan.
// Plans live in Git, readable by everyone who can read the repository and
// kept in its history forever.
const inlineSecretMsg = "looks like a secret value; plans are in Git, so secrets may not be written in them. " +
	"Put it in a Secret in the management cluster and name that Secret (spec.target.identity.from for cloud credentials)"

// secretKeys are field names that only ever hold secrets.
var secretKeys = []string{
	"password", "passwd", "secret", "token", "privatekey", "private_key",
	"applicationcredentialsecret", "application_credential_secret",
	"credentials", "kubeconfig", "cloudsyaml", "clouds.yaml", "cacertdata",
}

func looksLikeSecretKey(key string) bool {
	k := strings.ToLower(key)
	if strings.HasSuffix(k, "password") || strings.HasSuffix(k, "secret") || strings.HasSuffix(k, "token") {
		return true
	}
	return contains(secretKeys, k)
}

// looksLikeSecretValue spots secrets in string values: PEM private keys,
// URLs with a password, and clouds.yaml content pasted into a field.
func looksLikeSecretValue(s string) bool {
	if strings.Contains(s, "PRIVATE KEY-----") || strings.Contains(s, "BEGIN OPENSSH PRIVATE KEY") {
		return true
	}
	if strings.Contains(s, "://") {
		if u, err := url.Parse(strings.TrimSpace(s)); err == nil && u.User != nil {
			if _, hasPassword := u.User.Password(); hasPassword {
				return true
			}
		}
	}
	lower := strings.ToLower(s)
	return strings.Contains(lower, "password:") || strings.Contains(lower, "application_credential_secret")
}
