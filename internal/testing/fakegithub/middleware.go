// The front of every request: the request log, then an outage, a missing
// token or a queued fault, before the endpoint handlers.

package fakegithub

import (
	"cmp"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

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
			_, _ = io.WriteString(w, ft.Body)
			return
		}
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "4999")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
		w.Header().Set("X-RateLimit-Resource", "core")
		if !strings.HasPrefix(r.URL.Path, "/api/v3/repos/"+f.Owner+"/"+f.Repo+"/") && r.URL.Path != "/api/v3/user" && r.URL.Path != "/api/graphql" {
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
