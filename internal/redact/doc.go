// Package redact keeps secrets out of what ferry writes for people: log
// lines, errors, step results, status files, pull-request comments and
// Kubernetes Events (docs/architecture.md's safety rule "Secrets never
// appear in logs, events, Git commits, pull-request comments or Kubernetes
// Events").
//
// Scrub is the one pass every such sink applies to text. It replaces each
// value ferry knows to be secret with Mask, and redacts every URL in the
// text: its user information and its query string (an OpenStack auth_url
// may carry a password in either, a token is often passed as the user
// name), and the value of a JSON field whose name says it is secret (a
// "password", a "secret", a "token"), as a server echoes a request in its
// error. Error does the same to an error, keeping errors.Is and errors.As
// working on the original; Excerpt cuts an HTTP response body that an
// error quotes down to a short, scrubbed piece.
//
// The secret values are a process-wide registry, filled where ferry reads
// them (Register): the clouds.yaml of an identity Secret
// (internal/openstack), the token and passphrase files and the webhook
// secret (internal/secretfile), the plans repository's URL credentials
// (internal/gitsource), kubeconfig keys and tokens. A value shorter than
// MinLen is not registered: it would mask ordinary words, and no password
// ferry is given should be that short (the URL, JSON-field and other rules
// still apply to it). The registry is one strings.Replacer, rebuilt only
// when a new value is registered, so that a Scrub costs one pass over the
// text.
//
// It imports only the standard library (internal/layering's rule "the
// leaves import only the standard library", of which it is the one
// exception the other leaves may import): internal/logging and
// internal/secretfile, leaves themselves, use it.
package redact
