package fakegithub

import (
	"net/http"
	"net/http/httptest"
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
	reviews     map[int][]Review
	permissions map[string]string // by login
	requests    []Request
	faults      []fault
	gate        chan struct{} // when set, every request waits for it to close
	outage      outage
	personal    bool // the token is a person's, not an installation's: GET /user answers
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
		permissions: map[string]string{},
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
	mux.HandleFunc("GET "+base+"/pulls/{number}/reviews", f.listReviews)
	mux.HandleFunc("GET "+base+"/collaborators/{login}/permission", f.permission)
	mux.HandleFunc("GET /api/v3/user", f.authenticatedUser)
	mux.HandleFunc("POST /api/graphql", f.graphql)
	f.srv = httptest.NewServer(f.middleware(mux))
	f.URL = f.srv.URL
	return f
}

// Close stops the server.
func (f *Server) Close() { f.srv.Close() }
