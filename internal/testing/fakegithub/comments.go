// The issue comment and commit status endpoints, with GitHub's checks
// on their bodies.

package fakegithub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

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
