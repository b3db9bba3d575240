package forge

import (
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
	"testing"
	"time"
)

// fakeGitHub is an in-process GitHub: hand-written handlers for the REST
// endpoints the forge package calls, answering with the payloads GitHub
// documents (field names, pagination by Link header, rate-limit headers,
// error bodies) and recording every request. It is the right tool here
// because what is under test is GitHub-only behaviour (markers in issue
// comments, merged_by missing from list payloads, Enterprise paths, 403/429
// rate limits) and no GitHub server can run in a test. It serves under
// /api/v3/, as GitHub Enterprise Server does, which is where go-github sends
// requests when given the server's URL.
type fakeGitHub struct {
	t     *testing.T
	srv   *httptest.Server
	owner string
	repo  string
	token string

	mu          sync.Mutex
	nextID      int64
	comments    map[int][]*fakeComment // by issue (pull request) number
	statuses    []fakeStatus
	pulls       map[int]*fakePR
	commitPulls map[string][]int
	files       map[int][]fakeFile
	requests    []fakeRequest
	faults      []fakeFault
	gate        chan struct{} // when set, every request waits for it to close
}

type fakeComment struct {
	ID    int64
	Body  string
	Login string
}

type fakeStatus struct {
	SHA                                    string
	State, Description, Context, TargetURL string
}

type fakePR struct {
	Number         int
	State          string
	Title          string
	Head, Base     string // head sha, base ref
	MergedAt       string
	MergedBy       string
	MergeCommitSHA string
}

type fakeFile struct {
	Filename, Status, PreviousFilename string
}

type fakeRequest struct {
	Method, Path, Query string
	Body                string
}

// fakeFault answers the next request that matches method and path suffix
// instead of the handler.
type fakeFault struct {
	Method, PathSuffix string
	Status             int
	Header             map[string]string
	Body               string
}

const fakeDocs = "https://docs.github.com/rest"

func newFakeGitHub(t *testing.T) *fakeGitHub {
	t.Helper()
	f := &fakeGitHub{
		t:           t,
		owner:       "ferry-dev",
		repo:        "plans",
		token:       "ghp_test_token_never_logged",
		nextID:      1000,
		comments:    map[int][]*fakeComment{},
		pulls:       map[int]*fakePR{},
		commitPulls: map[string][]int{},
		files:       map[int][]fakeFile{},
	}
	mux := http.NewServeMux()
	repo := "/api/v3/repos/{owner}/{repo}"
	mux.HandleFunc("GET "+repo+"/issues/{number}/comments", f.listComments)
	mux.HandleFunc("POST "+repo+"/issues/{number}/comments", f.createComment)
	mux.HandleFunc("PATCH "+repo+"/issues/comments/{id}", f.editComment)
	mux.HandleFunc("POST "+repo+"/statuses/{sha}", f.createStatus)
	mux.HandleFunc("GET "+repo+"/commits/{sha}/pulls", f.commitPullRequests)
	mux.HandleFunc("GET "+repo+"/pulls", f.listPulls)
	mux.HandleFunc("GET "+repo+"/pulls/{number}", f.getPull)
	mux.HandleFunc("GET "+repo+"/pulls/{number}/files", f.listFiles)
	f.srv = httptest.NewServer(f.middleware(mux))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeGitHub) client(t *testing.T) *GitHub {
	t.Helper()
	g, err := New(f.owner, f.repo, f.token, f.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func (f *fakeGitHub) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		f.mu.Lock()
		f.requests = append(f.requests, fakeRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: string(body)})
		gate := f.gate
		var fault *fakeFault
		for i, ft := range f.faults {
			if ft.Method == r.Method && strings.HasSuffix(r.URL.Path, ft.PathSuffix) {
				fault = &ft
				f.faults = append(f.faults[:i:i], f.faults[i+1:]...)
				break
			}
		}
		f.mu.Unlock()
		if gate != nil {
			<-gate
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("X-GitHub-Media-Type", "github.v3; format=json")
		if r.Header.Get("Authorization") != "Bearer "+f.token {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "Bad credentials", "documentation_url": fakeDocs})
			return
		}
		if fault != nil {
			for k, v := range fault.Header {
				w.Header().Set(k, v)
			}
			w.WriteHeader(fault.Status)
			io.WriteString(w, fault.Body)
			return
		}
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "4999")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
		w.Header().Set("X-RateLimit-Resource", "core")
		if !strings.HasPrefix(r.URL.Path, "/api/v3/repos/"+f.owner+"/"+f.repo+"/") {
			notFound(w)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// fail queues a fault for the next request to a path ending in suffix.
func (f *fakeGitHub) fail(method, suffix string, status int, header map[string]string, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, fakeFault{Method: method, PathSuffix: suffix, Status: status, Header: header, Body: body})
}

// calls returns the recorded requests with method (all when empty).
func (f *fakeGitHub) calls(method string) []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeRequest
	for _, r := range f.requests {
		if method == "" || r.Method == method {
			out = append(out, r)
		}
	}
	return out
}

func (f *fakeGitHub) addComment(pr int, login, body string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	f.comments[pr] = append(f.comments[pr], &fakeComment{ID: f.nextID, Body: body, Login: login})
	return f.nextID
}

func (f *fakeGitHub) commentsOn(pr int) []fakeComment {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeComment
	for _, c := range f.comments[pr] {
		out = append(out, *c)
	}
	return out
}

func (f *fakeGitHub) statusList() []fakeStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.statuses)
}

func (f *fakeGitHub) addPR(pr fakePR, files ...fakeFile) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := pr
	f.pulls[pr.Number] = &p
	if _, ok := f.comments[pr.Number]; !ok {
		f.comments[pr.Number] = nil
	}
	f.files[pr.Number] = files
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func notFound(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found", "documentation_url": fakeDocs, "status": "404"})
}

func unprocessable(w http.ResponseWriter, field, msg string) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
		"message":           "Validation Failed",
		"errors":            []map[string]any{{"resource": "IssueComment", "code": "custom", "field": field, "message": msg}},
		"documentation_url": fakeDocs,
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

func (f *fakeGitHub) user(login string) map[string]any {
	typ := "User"
	if strings.HasSuffix(login, "[bot]") {
		typ = "Bot"
	}
	return map[string]any{"login": login, "id": len(login) * 7919, "type": typ, "site_admin": false,
		"html_url": "https://github.example.com/" + login}
}

func (f *fakeGitHub) commentJSON(issue int, c *fakeComment) map[string]any {
	base := f.srv.URL + "/api/v3/repos/" + f.owner + "/" + f.repo
	return map[string]any{
		"id":                 c.ID,
		"node_id":            "IC_" + strconv.FormatInt(c.ID, 10),
		"url":                base + "/issues/comments/" + strconv.FormatInt(c.ID, 10),
		"html_url":           fmt.Sprintf("https://github.example.com/%s/%s/pull/%d#issuecomment-%d", f.owner, f.repo, issue, c.ID),
		"issue_url":          fmt.Sprintf("%s/issues/%d", base, issue),
		"body":               c.Body,
		"user":               f.user(c.Login),
		"author_association": "MEMBER",
		"created_at":         "2024-05-01T10:00:00Z",
		"updated_at":         "2024-05-01T10:00:00Z",
	}
}

func (f *fakeGitHub) listComments(w http.ResponseWriter, r *http.Request) {
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

// bot is the login the token authenticates as.
const bot = "ferry-bot[bot]"

func (f *fakeGitHub) createComment(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.PathValue("number"))
	var in struct {
		Body *string `json:"body"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == nil {
		unprocessable(w, "body", "body is missing")
		return
	}
	if len([]rune(*in.Body)) > MaxCommentLength {
		unprocessable(w, "body", "Body is too long (maximum is 65536 characters)")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.comments[n]; !ok {
		notFound(w)
		return
	}
	f.nextID++
	c := &fakeComment{ID: f.nextID, Body: *in.Body, Login: bot}
	f.comments[n] = append(f.comments[n], c)
	w.Header().Set("Location", f.commentJSON(n, c)["url"].(string))
	writeJSON(w, http.StatusCreated, f.commentJSON(n, c))
}

func (f *fakeGitHub) editComment(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	var in struct {
		Body *string `json:"body"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == nil {
		unprocessable(w, "body", "body is missing")
		return
	}
	if len([]rune(*in.Body)) > MaxCommentLength {
		unprocessable(w, "body", "Body is too long (maximum is 65536 characters)")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for n, cs := range f.comments {
		for _, c := range cs {
			if c.ID == id {
				c.Body = *in.Body
				writeJSON(w, http.StatusOK, f.commentJSON(n, c))
				return
			}
		}
	}
	notFound(w)
}

func (f *fakeGitHub) deleteComment(id int64) {
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

func (f *fakeGitHub) createStatus(w http.ResponseWriter, r *http.Request) {
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
	if len([]rune(in.Description)) > MaxStatusDescription {
		unprocessable(w, "description", "description is too long (maximum is 140 characters)")
		return
	}
	if in.Context == "" {
		in.Context = "default"
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	f.statuses = append(f.statuses, fakeStatus{SHA: r.PathValue("sha"), State: in.State, Description: in.Description, Context: in.Context, TargetURL: in.TargetURL})
	writeJSON(w, http.StatusCreated, map[string]any{
		"url":         f.srv.URL + "/api/v3/repos/" + f.owner + "/" + f.repo + "/statuses/" + r.PathValue("sha"),
		"id":          f.nextID,
		"node_id":     "SC_" + strconv.FormatInt(f.nextID, 10),
		"state":       in.State,
		"description": in.Description,
		"target_url":  in.TargetURL,
		"context":     in.Context,
		"creator":     f.user(bot),
		"created_at":  "2024-05-01T10:00:00Z",
		"updated_at":  "2024-05-01T10:00:00Z",
	})
}

// pullJSON is a pull request as GitHub lists it ("pull-request-simple":
// no merged, merged_by, mergeable), or in full as GET /pulls/{n} returns it.
func (f *fakeGitHub) pullJSON(p *fakePR, full bool) map[string]any {
	base := f.srv.URL + "/api/v3/repos/" + f.owner + "/" + f.repo
	var mergedAt, mergeSHA any
	if p.MergedAt != "" {
		mergedAt = p.MergedAt
	}
	if p.MergeCommitSHA != "" {
		mergeSHA = p.MergeCommitSHA
	}
	repo := map[string]any{"id": 42, "name": f.repo, "full_name": f.owner + "/" + f.repo, "private": true}
	m := map[string]any{
		"url":                fmt.Sprintf("%s/pulls/%d", base, p.Number),
		"id":                 p.Number * 1000,
		"node_id":            fmt.Sprintf("PR_%d", p.Number),
		"html_url":           fmt.Sprintf("https://github.example.com/%s/%s/pull/%d", f.owner, f.repo, p.Number),
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
		"base":               map[string]any{"label": f.owner + ":" + p.Base, "ref": p.Base, "sha": "b0b0b0", "user": f.user(f.owner), "repo": repo},
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

func (f *fakeGitHub) commitPullRequests(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []map[string]any{}
	for _, n := range f.commitPulls[r.PathValue("sha")] {
		out = append(out, f.pullJSON(f.pulls[n], false))
	}
	writeJSON(w, http.StatusOK, paginate(w, r, out))
}

func (f *fakeGitHub) listPulls(w http.ResponseWriter, r *http.Request) {
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

func (f *fakeGitHub) getPull(w http.ResponseWriter, r *http.Request) {
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

func (f *fakeGitHub) listFiles(w http.ResponseWriter, r *http.Request) {
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
			"contents_url": f.srv.URL + "/api/v3/repos/" + f.owner + "/" + f.repo + "/contents/" + fl.Filename,
			"patch":        "@@ -1 +1 @@\n-approve: cluster\n+approve: control-plane",
		}
		if fl.PreviousFilename != "" {
			m["previous_filename"] = fl.PreviousFilename
		}
		out = append(out, m)
	}
	writeJSON(w, http.StatusOK, paginate(w, r, out))
}
