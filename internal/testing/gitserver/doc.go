// Package gitserver serves bare Git repositories over smart HTTP by running
// Git's own git-http-backend through net/http/cgi. It is the Git server of
// ferry's integration tests and local demo: clients clone, fetch and push
// against it exactly as they would against a forge, with no daemon to reap.
//
// It imports only the standard library (and needs git on the PATH); only
// tests, hack/ and internal/testing may import it (internal/layering's
// rule "test support stays out of the commands").
package gitserver
