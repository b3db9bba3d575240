// Package openstack is ferry's small client of the OpenStack APIs
// (gophercloud v2): authentication from a clouds.yaml Secret as CAPO reads
// it, name-to-ID resolution, keypairs, servers by name for provider IDs, a
// quota preflight, and clean-up of what ferry created. Callers depend on
// the interface they need at their point of use; *Client satisfies them.
//
// Errors say what was being done and to what. Those a person must fix (a
// wrong password, a missing or ambiguous name) are terminal
// (failure.IsTerminal); others, such as a refused connection, are retryable.
//
// It owns ferry's one way of reaching a cloud, shared by the observer
// (what exists) and the openstack executor (what to change): reading a
// plan's identity Secret (CloudCredentials), the tag ferry puts on what it
// creates (PlanTag), what CAPO records of a server it is to adopt
// (ServerBinding) and the quota a plan's new machines need
// (QuotaShortfall). Credentials never appear in a log or an error: a
// clouds.yaml's passwords, application credential secrets, tokens and
// what its auth_url carries are registered with internal/redact when it
// is read (CredentialsFromSecret, Connect); every error the package
// returns is scrubbed (no URL's user information or query string, no
// registered value); and a service's answer to a failed request, which
// gophercloud quotes whole in its error and which can echo the request,
// is cut to a short, scrubbed excerpt by the client's transport before
// gophercloud reads it.
//
// It must not import the observer, an executor, the bus, the planner, the
// reconciler or the status (internal/layering's rule "the shared clients
// sit below their users"): both the observer and the executors import it,
// and depending on either would tie the other to it.
package openstack
