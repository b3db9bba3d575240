// The pull request endpoints: list, get, by commit, and changed files.

package fakegithub

import (
	"fmt"
	"net/http"
	"strconv"
)

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
