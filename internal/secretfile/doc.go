// Package secretfile reads the one-line secrets ferry is given as files
// (Git tokens, the GitHub token, the webhook secret, SSH key passphrases):
// mounted from a Kubernetes Secret, they are read again at each use, so that
// a rotated secret is picked up without a restart.
//
// It owns reading them, the rule that an error names the file, never
// its content, and registering each value it reads with internal/redact:
// internal/gitsource reads its tokens, SSH passphrases and the webhook
// secret through it, internal/forge its API token.
//
// It imports only the standard library and internal/redact
// (internal/layering's rule "the leaves import only the standard
// library").
package secretfile
