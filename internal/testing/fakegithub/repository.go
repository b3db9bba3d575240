// The repository's state as tests set it up and inspect it: comments,
// statuses, pull requests and the commits linked to them.

package fakegithub

import (
	"net/http"
	"slices"
	"strings"
	"time"
)

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

// SetPermission gives the account login a permission on the repository as
// GitHub reports it (admin, write, read, none); accounts never given one
// do not exist (404).
func (f *Server) SetPermission(login, permission string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.permissions[login] = permission
}

// permission answers GET collaborators/{login}/permission as GitHub does:
// the permission, its role name and the user.
func (f *Server) permission(w http.ResponseWriter, r *http.Request) {
	login := r.PathValue("login")
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.permissions[login]
	if !ok {
		notFound(w)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"permission": p, "role_name": p, "user": f.user(login)})
}
