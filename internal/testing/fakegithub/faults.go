// Fault injection: one failed answer (Fail), held requests (Gate) and a
// whole-API outage (Outage).

package fakegithub

import (
	"io"
	"net/http"
	"strconv"
	"time"
)

// outage is a period during which the API answers every request with an
// error: 502 until badGateway, then 403 (secondary rate limit) until end.
type outage struct {
	badGateway, end time.Time
}

// fault answers the next request that matches method and path suffix
// instead of the handler.
type fault struct {
	Method, PathSuffix string
	Status             int
	Header             map[string]string
	Body               string
}

// Fail answers the next request with method to a path ending in suffix
// with status, header and body instead of the handler's answer.
func (f *Server) Fail(method, suffix string, status int, header map[string]string, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, fault{Method: method, PathSuffix: suffix, Status: status, Header: header, Body: body})
}

// Gate makes every request wait until gate is closed (nil: none wait).
func (f *Server) Gate(gate chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gate = gate
}

// Outage makes the API unavailable for d from now, and returns when the
// outage ends. Every API request that arrives during the first half of d is
// answered 502 Bad Gateway, as when GitHub's front end cannot reach the API;
// every one during the second half 403 with GitHub's secondary rate limit
// answer and a Retry-After header counting the seconds until the outage
// ends (at least 1), as when a recovering API sheds load. Requests are
// recorded as usual but never reach a handler, so nothing changes; pending
// Fail answers wait for the outage to end. Webhook deliveries (Deliver) go
// out from the test, not through the server, and are not affected. A new
// call replaces the outage in progress; d <= 0 ends it.
func (f *Server) Outage(d time.Duration) time.Time {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outage = outage{badGateway: now.Add(d / 2), end: now.Add(d)}
	return f.outage.end
}

// secondaryRateLimit is the body of GitHub's 403 answer when a client hits a
// secondary rate limit; go-github recognises it by documentation_url.
const secondaryRateLimit = `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",` +
	`"documentation_url":"https://docs.github.com/rest/overview/resources-in-the-rest-api#secondary-rate-limits"}`

// covers reports whether a request arriving at t falls in the outage.
func (o outage) covers(t time.Time) bool { return t.Before(o.end) }

// answer writes the outage's answer to a request that arrived at now.
func (o outage) answer(w http.ResponseWriter, now time.Time) {
	if now.Before(o.badGateway) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1></body></html>\n")
		return
	}
	// Whole seconds, rounded up, so that a client that waits them out
	// comes back after the outage.
	wait := max((o.end.Sub(now)+time.Second-1)/time.Second, 1)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Retry-After", strconv.FormatInt(int64(wait), 10))
	w.Header().Set("X-RateLimit-Limit", "5000")
	w.Header().Set("X-RateLimit-Remaining", "4999")
	w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(now.Add(time.Hour).Unix(), 10))
	w.Header().Set("X-RateLimit-Resource", "core")
	w.WriteHeader(http.StatusForbidden)
	_, _ = io.WriteString(w, secondaryRateLimit+"\n")
}
