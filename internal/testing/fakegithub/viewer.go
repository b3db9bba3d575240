// Who the token is: GET /user and GraphQL's viewer, answered as GitHub
// answers them for a GitHub App's installation token (Bot) or, after
// PersonalToken, for a person's.

package fakegithub

import (
	"encoding/json"
	"net/http"
	"strings"
)

// PersonalToken makes the token a person's (a personal access token of
// the account Bot) rather than a GitHub App installation's: GET /user
// then answers the account instead of refusing.
func (f *Server) PersonalToken() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.personal = true
}

// authenticatedUser answers GET /user: the account for a person's token;
// for an installation token, GitHub's refusal, since an installation is
// not a user.
func (f *Server) authenticatedUser(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	personal := f.personal
	f.mu.Unlock()
	if !personal {
		writeJSON(w, http.StatusForbidden, map[string]any{"message": "Resource not accessible by integration",
			"documentation_url": docs + "/users/users#get-the-authenticated-user", "status": "403"})
		return
	}
	writeJSON(w, http.StatusOK, f.user(Bot))
}

// graphql answers the one GraphQL query ferry sends, the viewer's login,
// which GitHub answers for installation tokens too; any other query gets
// GraphQL's error body, with status 200 as GitHub sends it.
func (f *Server) graphql(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Query string `json:"query"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || !strings.Contains(in.Query, "viewer") {
		writeJSON(w, http.StatusOK, map[string]any{"errors": []map[string]any{{"message": "the stand-in answers only the viewer's login"}}})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"viewer": map[string]any{"login": Bot}}})
}
