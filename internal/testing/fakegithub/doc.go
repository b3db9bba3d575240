// Package fakegithub is a stand-in for GitHub's REST API: hand-written
// handlers for the endpoints ferry's forge package calls, answering with
// the payloads GitHub documents (field names, pagination by Link header,
// rate-limit headers, error bodies, the comment and status length limits)
// and recording every request. Tests use it because no GitHub server can
// run in a test; `make demo` uses it to show the comments ferry writes. It
// serves under /api/v3/ (and the one GraphQL query ferry sends, the
// token's login, under /api/graphql), as GitHub Enterprise Server does,
// which is where go-github sends requests when given the server's URL.
//
// It also delivers webhooks the way GitHub does (Deliver), signed with
// X-Hub-Signature-256.
//
// For fault injection, Fail answers one request with an error, Gate holds
// every request, and Outage makes the whole API unavailable for a while.
//
// It stands in for what only GitHub does (its rate limits, its webhook
// signature, its secondary rate limit's 403); what Gitea does too is
// tested against a real Gitea (testenv.StartGitea). It imports only the
// standard library, and only tests, hack/ and internal/testing may import
// it (internal/layering's rule "test support stays out of the commands").
package fakegithub
