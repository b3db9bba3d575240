package fakegithub

import (
	"net/http"
	"strconv"
	"time"
)

// Review is a review of a pull request: State as GitHub names it
// (APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED), on commit Commit.
type Review struct {
	Login, State, Commit string
}

// AddReview records a review of pull request n, submitted now.
func (f *Server) AddReview(n int, r Review) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reviews == nil {
		f.reviews = map[int][]Review{}
	}
	f.reviews[n] = append(f.reviews[n], r)
}

// listReviews answers GET /repos/{owner}/{repo}/pulls/{number}/reviews,
// oldest first, as GitHub does.
func (f *Server) listReviews(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.PathValue("number"))
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.pulls[n]; !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	out := []map[string]any{}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, rv := range f.reviews[n] {
		out = append(out, map[string]any{"id": i + 1, "user": f.user(rv.Login), "state": rv.State, "commit_id": rv.Commit,
			"submitted_at": start.Add(time.Duration(i) * time.Minute).Format(time.RFC3339)})
	}
	writeJSON(w, http.StatusOK, paginate(w, r, out))
}
