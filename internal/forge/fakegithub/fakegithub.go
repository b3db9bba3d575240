// Package fakegithub is a stand-in for GitHub's REST API: hand-written
// handlers for the endpoints ferry's forge package calls, answering with
// the payloads GitHub documents (field names, pagination by Link header,
// rate-limit headers, error bodies, the comment and status length limits)
// and recording every request. Tests use it because no GitHub server can
// run in a test; `make demo` uses it to show the comments ferry writes. It
// serves under /api/v3/, as GitHub Enterprise Server does, which is where
// go-github sends requests when given the server's URL.
//
// It also delivers webhooks the way GitHub does (Deliver), signed with
// X-Hub-Signature-256.
//
// For fault injection, Fail answers one request with an error, Gate holds
// every request, and Outage makes the whole API unavailable for a while.
package fakegithub

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// GitHub's limits, enforced here independently of the client's own.
const (
	maxCommentLength     = 65536
	maxStatusDescription = 140
)

// Bot is the login the token authenticates as: the author of the comments
// and statuses ferry writes.
const Bot = "ferry-bot[bot]"

// Server is a running stand-in for one repository's GitHub API.
type Server struct {
	// URL is the server's base URL, for forge.New's apiURL.
	URL string
	// Owner and Repo name the repository it serves; Token is the one
	// token it accepts (Authorization: Bearer).
	Owner, Repo, Token string

	srv         *httptest.Server
	mu          sync.Mutex
	nextID      int64
	comments    map[int][]*Comment // by issue (pull request) number
	statuses    []Status
	pulls       map[int]*PR
	commitPulls map[string][]int
	files       map[int][]File
	requests    []Request
	faults      []fault
	gate        chan struct{} // when set, every request waits for it to close
	outage      outage
}

// outage is a period during which the API answers every request with an
// error: 502 until badGateway, then 403 (secondary rate limit) until end.
type outage struct {
	badGateway, end time.Time
}

// Comment is an issue comment on a pull request.
type Comment struct {
	ID    int64
	Body  string
	Login string
}

// Status is a commit status as it was posted.
type Status struct {
	SHA                                    string
	State, Description, Context, TargetURL string
}

// PR is a pull request.
type PR struct {
	Number         int
	State          string // "open" or "closed"
	Title          string
	Head, Base     string // head sha, base ref
	MergedAt       string // RFC 3339; empty while not merged
	MergedBy       string
	MergeCommitSHA string
}

// File is a file a pull request changes.
type File struct {
	Filename, Status, PreviousFilename string
}

// Request is a request the server received.
type Request struct {
	Method, Path, Query string
	Body                string
	// Time is when the request arrived.
	Time time.Time
	// Status is the status code of the answer; 0 while it is being written.
	Status int
}

// fault answers the next request that matches method and path suffix
// instead of the handler.
type fault struct {
	Method, PathSuffix string
	Status             int
	Header             map[string]string
	Body               string
}

const docs = "https://docs.github.com/rest"

// New starts a stand-in for the repository owner/repo that accepts token.
// Close stops it.
func New(owner, repo, token string) *Server {
	f := &Server{
		Owner:       owner,
		Repo:        repo,
		Token:       token,
		nextID:      1000,
		comments:    map[int][]*Comment{},
		pulls:       map[int]*PR{},
		commitPulls: map[string][]int{},
		files:       map[int][]File{},
	}
	mux := http.NewServeMux()
	base := "/api/v3/repos/{owner}/{repo}"
	mux.HandleFunc("GET "+base+"/issues/{number}/comments", f.listComments)
	mux.HandleFunc("POST "+base+"/issues/{number}/comments", f.createComment)
	mux.HandleFunc("PATCH "+base+"/issues/comments/{id}", f.editComment)
	mux.HandleFunc("POST "+base+"/statuses/{sha}", f.createStatus)
	mux.HandleFunc("GET "+base+"/commits/{sha}/pulls", f.commitPullRequests)
	mux.HandleFunc("GET "+base+"/pulls", f.listPulls)
	mux.HandleFunc("GET "+base+"/pulls/{number}", f.getPull)
	mux.HandleFunc("GET "+base+"/pulls/{number}/files", f.listFiles)
	f.srv = httptest.NewServer(f.middleware(mux))
	f.URL = f.srv.URL
	return f
}

// Close stops the server.
func (f *Server) Close() { f.srv.Close() }

// middleware records every request and answers, before the handlers, an
// outage, a missing token or a queued fault; in that order.
func (f *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		now := time.Now()
		f.mu.Lock()
		n := len(f.requests)
		f.requests = append(f.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: string(body), Time: now})
		gate, out := f.gate, f.outage
		var ft *fault
		if !out.covers(now) { // a fault waits for the outage to end
			ft = f.takeFaultLocked(r.Method, r.URL.Path)
		}
		f.mu.Unlock()
		rec := &statusRecorder{ResponseWriter: w}
		w = rec
		defer func() {
			f.mu.Lock()
			f.requests[n].Status = cmp.Or(rec.status, http.StatusOK)
			f.mu.Unlock()
		}()
		if gate != nil {
			<-gate
		}
		if out.covers(now) {
			out.answer(w, now)
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("X-GitHub-Media-Type", "github.v3; format=json")
		if r.Header.Get("Authorization") != "Bearer "+f.Token {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "Bad credentials", "documentation_url": docs})
			return
		}
		if ft != nil {
			for k, v := range ft.Header {
				w.Header().Set(k, v)
			}
			w.WriteHeader(ft.Status)
			io.WriteString(w, ft.Body)
			return
		}
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "4999")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
		w.Header().Set("X-RateLimit-Resource", "core")
		if !strings.HasPrefix(r.URL.Path, "/api/v3/repos/"+f.Owner+"/"+f.Repo+"/") {
			notFound(w)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// takeFaultLocked removes and returns the first fault queued for a request
// with method to path, nil when there is none; f.mu is held.
func (f *Server) takeFaultLocked(method, path string) *fault {
	for i, ft := range f.faults {
		if ft.Method == method && strings.HasSuffix(path, ft.PathSuffix) {
			f.faults = append(f.faults[:i:i], f.faults[i+1:]...)
			return &ft
		}
	}
	return nil
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
		io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1></body></html>\n")
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
	io.WriteString(w, secondaryRateLimit+"\n")
}

// statusRecorder notes the status code of an answer for the request log.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Calls returns the recorded requests with method (all when empty).
func (f *Server) Calls(method string) []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Request
	for _, r := range f.requests {
		if method == "" || r.Method == method {
			out = append(out, r)
		}
	}
	return out
}

// AddComment adds a comment by login to pull request pr, as a person
// would, and returns its ID.
func (f *Server) AddComment(pr int, login, body string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	f.comments[pr] = append(f.comments[pr], &Comment{ID: f.nextID, Body: body, Login: login})
	return f.nextID
}

// Comments returns the comments on pull request pr, oldest first.
func (f *Server) Comments(pr int) []Comment {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Comment
	for _, c := range f.comments[pr] {
		out = append(out, *c)
	}
	return out
}

// CountComments counts, by pull request, the comments whose body starts
// with prefix, such as forge.Marker(key). ferry keeps one comment per key,
// so a count above one is a duplicate.
func (f *Server) CountComments(prefix string) map[int]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	counts := map[int]int{}
	for n, cs := range f.comments {
		for _, c := range cs {
			if strings.HasPrefix(c.Body, prefix) {
				counts[n]++
			}
		}
	}
	return counts
}

// DeleteComment deletes a comment, as a person would.
func (f *Server) DeleteComment(id int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for n, cs := range f.comments {
		for i, c := range cs {
			if c.ID == id {
				f.comments[n] = append(cs[:i:i], cs[i+1:]...)
				return
			}
		}
	}
}

// Statuses returns the commit statuses posted, in order.
func (f *Server) Statuses() []Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.statuses)
}

// AddPR adds (or replaces) a pull request and the files it changes.
func (f *Server) AddPR(pr PR, files ...File) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := pr
	f.pulls[pr.Number] = &p
	if _, ok := f.comments[pr.Number]; !ok {
		f.comments[pr.Number] = nil
	}
	f.files[pr.Number] = files
	f.commitPulls[pr.Head] = appendNew(f.commitPulls[pr.Head], pr.Number)
}

// Push records a push to open pull request n: its new head and the files
// it now changes.
func (f *Server) Push(n int, head string, files ...File) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.pulls[n]; ok {
		p.Head = head
		f.files[n] = files
		f.commitPulls[head] = appendNew(f.commitPulls[head], n)
	}
}

// Merge records that by merged pull request n into mergeSHA.
func (f *Server) Merge(n int, mergeSHA, by string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.pulls[n]; ok {
		p.State, p.MergedBy, p.MergeCommitSHA = "closed", by, mergeSHA
		p.MergedAt = time.Now().UTC().Format(time.RFC3339)
		f.commitPulls[mergeSHA] = appendNew(f.commitPulls[mergeSHA], n)
	}
}

// LinkCommit associates commit sha with pull requests, as GitHub does for
// the commits a pull request brings.
func (f *Server) LinkCommit(sha string, prs ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range prs {
		f.commitPulls[sha] = appendNew(f.commitPulls[sha], n)
	}
}

func appendNew(list []int, n int) []int {
	if slices.Contains(list, n) {
		return list
	}
	return append(list, n)
}

// Deliver posts a webhook to url as GitHub does: event in X-GitHub-Event,
// the JSON payload signed with secret in X-Hub-Signature-256. It returns
// the answer's status code.
func Deliver(ctx context.Context, url string, secret []byte, event string, payload any) (int, error) {
	body, err := json.Marshal(payload)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", strconv.FormatInt(time.Now().UnixNano(), 16))
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// PullRequestEvent is the payload of a pull_request webhook for pull
// request n with action ("opened", "synchronize", "closed").
func (f *Server) PullRequestEvent(n int, action string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pulls[n]
	if !ok {
		return map[string]any{"action": action, "number": n}
	}
	return map[string]any{"action": action, "number": n, "pull_request": f.pullJSON(p, true),
		"repository": map[string]any{"name": f.Repo, "full_name": f.Owner + "/" + f.Repo}, "sender": f.user("alice")}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func notFound(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found", "documentation_url": docs, "status": "404"})
}

func unprocessable(w http.ResponseWriter, field, msg string) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
		"message":           "Validation Failed",
		"errors":            []map[string]any{{"resource": "IssueComment", "code": "custom", "field": field, "message": msg}},
		"documentation_url": docs,
	})
}

// paginate serves items a page at a time, as GitHub does: per_page
// (default 30, at most 100) and page, with a Link header to the others.
func paginate[T any](w http.ResponseWriter, r *http.Request, items []T) []T {
	per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
	if per <= 0 {
		per = 30
	}
	per = min(per, 100)
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	page = max(page, 1)
	last := max((len(items)+per-1)/per, 1)
	link := func(p int, rel string) string {
		u := url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path}
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(p))
		u.RawQuery = q.Encode()
		return fmt.Sprintf("<%s>; rel=%q", u.String(), rel)
	}
	var links []string
	if page < last {
		links = append(links, link(page+1, "next"), link(last, "last"))
	}
	if page > 1 {
		links = append(links, link(1, "first"), link(page-1, "prev"))
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	lo := min((page-1)*per, len(items))
	hi := min(lo+per, len(items))
	return items[lo:hi]
}

func (f *Server) user(login string) map[string]any {
	typ := "User"
	if strings.HasSuffix(login, "[bot]") {
		typ = "Bot"
	}
	return map[string]any{"login": login, "id": len(login) * 7919, "type": typ, "site_admin": false,
		"html_url": "https://github.example.com/" + login}
}

func (f *Server) commentJSON(issue int, c *Comment) map[string]any {
	base := f.URL + "/api/v3/repos/" + f.Owner + "/" + f.Repo
	return map[string]any{
		"id":                 c.ID,
		"node_id":            "IC_" + strconv.FormatInt(c.ID, 10),
		"url":                base + "/issues/comments/" + strconv.FormatInt(c.ID, 10),
		"html_url":           fmt.Sprintf("https://github.example.com/%s/%s/pull/%d#issuecomment-%d", f.Owner, f.Repo, issue, c.ID),
		"issue_url":          fmt.Sprintf("%s/issues/%d", base, issue),
		"body":               c.Body,
		"user":               f.user(c.Login),
		"author_association": "MEMBER",
		"created_at":         "2024-05-01T10:00:00Z",
		"updated_at":         "2024-05-01T10:00:00Z",
	}
}

func (f *Server) listComments(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.PathValue("number"))
	f.mu.Lock()
	defer f.mu.Unlock()
	cs, ok := f.comments[n]
	if !ok {
		notFound(w)
		return
	}
	out := []map[string]any{}
	for _, c := range paginate(w, r, cs) {
		out = append(out, f.commentJSON(n, c))
	}
	writeJSON(w, http.StatusOK, out)
}

// commentBody reads a comment's body as GitHub checks it, answering 422
// when it is missing or too long.
func commentBody(w http.ResponseWriter, r *http.Request) (string, bool) {
	var in struct {
		Body *string `json:"body"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == nil {
		unprocessable(w, "body", "body is missing")
		return "", false
	}
	if len([]rune(*in.Body)) > maxCommentLength {
		unprocessable(w, "body", "Body is too long (maximum is 65536 characters)")
		return "", false
	}
	return *in.Body, true
}

func (f *Server) createComment(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.PathValue("number"))
	body, ok := commentBody(w, r)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.comments[n]; !ok {
		notFound(w)
		return
	}
	f.nextID++
	c := &Comment{ID: f.nextID, Body: body, Login: Bot}
	f.comments[n] = append(f.comments[n], c)
	w.Header().Set("Location", f.commentJSON(n, c)["url"].(string))
	writeJSON(w, http.StatusCreated, f.commentJSON(n, c))
}

func (f *Server) editComment(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	body, ok := commentBody(w, r)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for n, cs := range f.comments {
		for _, c := range cs {
			if c.ID == id {
				c.Body = body
				writeJSON(w, http.StatusOK, f.commentJSON(n, c))
				return
			}
		}
	}
	notFound(w)
}

func (f *Server) createStatus(w http.ResponseWriter, r *http.Request) {
	var in struct {
		State       string `json:"state"`
		TargetURL   string `json:"target_url"`
		Description string `json:"description"`
		Context     string `json:"context"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		unprocessable(w, "state", err.Error())
		return
	}
	switch in.State {
	case "pending", "success", "failure", "error":
	default:
		unprocessable(w, "state", "state is not included in the list")
		return
	}
	if len([]rune(in.Description)) > maxStatusDescription {
		unprocessable(w, "description", "description is too long (maximum is 140 characters)")
		return
	}
	if in.Context == "" {
		in.Context = "default"
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	f.statuses = append(f.statuses, Status{SHA: r.PathValue("sha"), State: in.State, Description: in.Description, Context: in.Context, TargetURL: in.TargetURL})
	writeJSON(w, http.StatusCreated, map[string]any{
		"url":         f.URL + "/api/v3/repos/" + f.Owner + "/" + f.Repo + "/statuses/" + r.PathValue("sha"),
		"id":          f.nextID,
		"node_id":     "SC_" + strconv.FormatInt(f.nextID, 10),
		"state":       in.State,
		"description": in.Description,
		"target_url":  in.TargetURL,
		"context":     in.Context,
		"creator":     f.user(Bot),
		"created_at":  "2024-05-01T10:00:00Z",
		"updated_at":  "2024-05-01T10:00:00Z",
	})
}

// pullJSON is a pull request as GitHub lists it ("pull-request-simple":
// no merged, merged_by, mergeable), or in full as GET /pulls/{n} returns it.
func (f *Server) pullJSON(p *PR, full bool) map[string]any {
	base := f.URL + "/api/v3/repos/" + f.Owner + "/" + f.Repo
	var mergedAt, mergeSHA any
	if p.MergedAt != "" {
		mergedAt = p.MergedAt
	}
	if p.MergeCommitSHA != "" {
		mergeSHA = p.MergeCommitSHA
	}
	repo := map[string]any{"id": 42, "name": f.Repo, "full_name": f.Owner + "/" + f.Repo, "private": true}
	m := map[string]any{
		"url":                fmt.Sprintf("%s/pulls/%d", base, p.Number),
		"id":                 p.Number * 1000,
		"node_id":            fmt.Sprintf("PR_%d", p.Number),
		"html_url":           fmt.Sprintf("https://github.example.com/%s/%s/pull/%d", f.Owner, f.Repo, p.Number),
		"number":             p.Number,
		"state":              p.State,
		"locked":             false,
		"title":              p.Title,
		"user":               f.user("alice"),
		"body":               "Approve the next phase.",
		"created_at":         "2024-05-01T09:00:00Z",
		"updated_at":         "2024-05-01T10:00:00Z",
		"closed_at":          mergedAt,
		"merged_at":          mergedAt,
		"merge_commit_sha":   mergeSHA,
		"head":               map[string]any{"label": "alice:approve", "ref": "approve", "sha": p.Head, "user": f.user("alice"), "repo": repo},
		"base":               map[string]any{"label": f.Owner + ":" + p.Base, "ref": p.Base, "sha": "b0b0b0", "user": f.user(f.Owner), "repo": repo},
		"draft":              false,
		"author_association": "MEMBER",
	}
	if full {
		m["merged"] = p.MergedAt != ""
		m["mergeable"] = nil
		m["comments"] = len(f.comments[p.Number])
		m["changed_files"] = len(f.files[p.Number])
		m["merged_by"] = nil
		if p.MergedBy != "" {
			m["merged_by"] = f.user(p.MergedBy)
		}
	}
	return m
}

func (f *Server) commitPullRequests(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []map[string]any{}
	for _, n := range f.commitPulls[r.PathValue("sha")] {
		out = append(out, f.pullJSON(f.pulls[n], false))
	}
	writeJSON(w, http.StatusOK, paginate(w, r, out))
}

func (f *Server) listPulls(w http.ResponseWriter, r *http.Request) {
	state := r.URL.Query().Get("state")
	if state == "" {
		state = "open"
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []map[string]any{}
	for n := 1; n <= 10000; n++ { // newest last here; GitHub sorts by creation
		if p, ok := f.pulls[n]; ok && (state == "all" || p.State == state) {
			out = append(out, f.pullJSON(p, false))
		}
	}
	writeJSON(w, http.StatusOK, paginate(w, r, out))
}

func (f *Server) getPull(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.PathValue("number"))
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pulls[n]
	if !ok {
		notFound(w)
		return
	}
	writeJSON(w, http.StatusOK, f.pullJSON(p, true))
}

func (f *Server) listFiles(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.PathValue("number"))
	f.mu.Lock()
	defer f.mu.Unlock()
	files, ok := f.files[n]
	if !ok {
		notFound(w)
		return
	}
	out := []map[string]any{}
	for i, fl := range files {
		m := map[string]any{
			"sha":          fmt.Sprintf("%040d", i),
			"filename":     fl.Filename,
			"status":       fl.Status,
			"additions":    3,
			"deletions":    1,
			"changes":      4,
			"blob_url":     "https://github.example.com/blob/" + fl.Filename,
			"raw_url":      "https://github.example.com/raw/" + fl.Filename,
			"contents_url": f.URL + "/api/v3/repos/" + f.Owner + "/" + f.Repo + "/contents/" + fl.Filename,
			"patch":        "@@ -1 +1 @@\n-approve: cluster\n+approve: control-plane",
		}
		if fl.PreviousFilename != "" {
			m["previous_filename"] = fl.PreviousFilename
		}
		out = append(out, m)
	}
	writeJSON(w, http.StatusOK, paginate(w, r, out))
}
