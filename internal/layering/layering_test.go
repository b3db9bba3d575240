package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is ferry's module path; the rules name its packages relative to it.
const module = "github.com/ferry-dev/ferry"

// clients are the modules that reach a backend: a Kubernetes API server,
// NATS, OpenStack, Git, a forge.
var clients = []string{
	"k8s.io/client-go/...",
	"sigs.k8s.io/controller-runtime/...",
	"github.com/nats-io/...",
	"github.com/gophercloud/...",
	"github.com/go-git/...",
	"github.com/google/go-github/...",
	"code.gitea.io/...",
}

// data are the packages that hold data only; the planner may import them
// and nothing else of ferry's.
var data = []string{"api/v1alpha1", "internal/failure", "internal/observed", "internal/step"}

// rule is one line of the layering: the packages it applies to may not
// import, directly or through another package, any package it forbids
// (or, when only is not nil, any package outside the standard library
// that only does not list: an empty only allows the standard library
// alone). Each package's doc.go states the rules that apply to it.
// Patterns are relative to the module, or full import paths for other
// modules; a trailing "/..." matches the package and everything under it.
// Only the packages' non-test code is checked: tests may import anything.
type rule struct {
	name   string
	from   []string
	except []string
	forbid []string
	only   []string
	// direct checks the packages' own imports only, for rules about what
	// a package does rather than what it depends on (the planner's I/O).
	direct bool
	reason string
	// pending, when set, says why the rule is not enforced yet: its
	// violations are logged, and once it holds the test says so, so that
	// the mark can be dropped.
	pending string
}

var rules = []rule{{
	name:   "test support stays out of the commands",
	from:   []string{"..."},
	except: []string{"hack/...", "internal/testing/..."},
	forbid: []string{"internal/testing/..."},
	reason: "internal/testing holds stand-ins, fixtures and test backends; only tests, hack/ and internal/testing itself may import it, so that no command ships them",
}, {
	name:   "the planner is pure",
	from:   []string{"internal/planner"},
	only:   data,
	reason: "plan and snapshot in, step groups out: the planner imports only the data packages, so that no client, bus, Git or forge can reach it",
}, {
	name:   "the planner does no I/O and keeps no clock",
	from:   []string{"internal/planner"},
	direct: true,
	forbid: []string{"context", "log", "log/slog", "os", "os/...", "net", "net/...", "math/rand", "math/rand/...", "syscall"},
	reason: "the same plan and snapshot must give the same steps, byte for byte; observation happens before the planner, logging after it",
}, {
	name:   "the data packages hold data",
	from:   data,
	only:   data,
	reason: "the planner, the bus, the status and the executors all import them; a client imported here would reach the planner",
}, {
	name:   "the leaves import only the standard library",
	from:   []string{"api/v1alpha1", "internal/failure", "internal/logging", "internal/secretfile", "internal/memlimit"},
	only:   []string{"internal/redact"},
	reason: "every layer imports them, hack/schemagen included; a dependency here is a dependency of everything. internal/redact, itself standard library only, is the one exception: the logger's handler and the reader of secret files keep secrets out of what ferry writes through it",
}, {
	name:   "the leaves import only the standard library",
	from:   []string{"internal/redact"},
	only:   []string{},
	reason: "the other leaves import it (internal/logging, internal/secretfile); a dependency here is a dependency of everything",
}, {
	name:   "plan files are decoded without a backend",
	from:   []string{"internal/planfile"},
	forbid: append(slices.Clone(clients), "internal/..."),
	reason: "`reconciler validate` checks plan files offline, in a CI job with no cluster, bus or Git behind it; planfile knows the file format (api/v1alpha1) and nothing else of ferry's",
}, {
	name:   "executors never import the observer",
	from:   []string{"internal/executor/..."},
	forbid: []string{"internal/observer"},
	reason: "an executor acts on the world as it is when its step runs, never on the observer's cached snapshot; what both need (kubeconfigs, manifests, cloud credentials) lives in internal/kube and internal/openstack",
}, {
	name:   "an executor only runs its step",
	from:   []string{"internal/executor/..."},
	forbid: []string{"internal/planner", "internal/reconciler", "internal/status/...", "internal/gitsource", "internal/forge", "internal/planfile", "internal/clusterevents", "internal/app"},
	reason: "a step carries everything its executor needs; planning, recording the status and talking to Git or the forge are the reconciler's",
}, {
	name:   "executor kinds are independent",
	from:   []string{"internal/executor/kube"},
	forbid: []string{"internal/executor/openstack", "internal/executor/workload"},
	reason: "one package per kind, so that a replica of one kind carries none of another's clients; what they share is in internal/executor",
}, {
	name:   "executor kinds are independent",
	from:   []string{"internal/executor/openstack"},
	forbid: []string{"internal/executor/kube", "internal/executor/workload"},
	reason: "one package per kind, so that a replica of one kind carries none of another's clients; what they share is in internal/executor",
}, {
	name:   "executor kinds are independent",
	from:   []string{"internal/executor/workload"},
	forbid: []string{"internal/executor/kube", "internal/executor/openstack"},
	reason: "one package per kind, so that a replica of one kind carries none of another's clients; what they share is in internal/executor",
}, {
	name:   "the observer only reads",
	from:   []string{"internal/observer"},
	forbid: []string{"internal/executor/...", "internal/events", "internal/planner", "internal/status/...", "internal/reconciler", "internal/gitsource", "internal/forge"},
	reason: "it fills a snapshot; acting, publishing, planning and recording come after it, in other packages",
}, {
	name:   "the shared clients sit below their users",
	from:   []string{"internal/kube", "internal/openstack"},
	forbid: []string{"internal/observer", "internal/executor/...", "internal/events", "internal/planner", "internal/reconciler", "internal/status/..."},
	reason: "the observer and the executors share them; a client that imported either would tie the other to it",
}, {
	name:   "the bus knows no backend",
	from:   []string{"internal/events"},
	forbid: []string{"internal/planner", "internal/observer", "internal/executor/...", "internal/status/...", "internal/reconciler", "internal/gitsource", "internal/forge", "k8s.io/client-go/...", "sigs.k8s.io/controller-runtime/...", "github.com/gophercloud/...", "github.com/go-git/..."},
	reason: "events carries steps and results as data between the reconciler and the executors; it depends on neither side nor on their backends",
}, {
	name:   "the status imports no Git package",
	from:   []string{"internal/status/..."},
	forbid: []string{"internal/gitsource", "github.com/go-git/..."},
	reason: "the status is data, merged, encoded and rendered without I/O; committing its files to the status branch is the reconciler's (GitStatusStore, through gitsource.Branch)",
}, {
	name:   "the status speaks to no forge, cluster or cloud",
	from:   []string{"internal/status/..."},
	forbid: []string{"internal/forge", "github.com/google/go-github/...", "code.gitea.io/...", "k8s.io/client-go/...", "sigs.k8s.io/controller-runtime/...", "github.com/gophercloud/..."},
	reason: "the status, its file and its text are data and pure functions (they reach NATS's client only through internal/events' types); posting the comment and the commit statuses is the reconciler's, through internal/forge",
}, {
	name:   "the status file and its text are apart",
	from:   []string{"internal/status/render"},
	forbid: []string{"internal/status/statusfile"},
	reason: "the file on the status branch and the text of `reconciler status` and the comment are two views of internal/status, neither built on the other",
}, {
	name:   "the status file and its text are apart",
	from:   []string{"internal/status/statusfile"},
	forbid: []string{"internal/status/render"},
	reason: "the file on the status branch and the text of `reconciler status` and the comment are two views of internal/status, neither built on the other",
}, {
	name:   "Git and the forge are clients, not the loop",
	from:   []string{"internal/gitsource", "internal/forge"},
	forbid: []string{"internal/reconciler", "internal/planner", "internal/status/...", "internal/events", "internal/observer", "internal/executor/..."},
	reason: "they speak Git and the forge's API; what to read, write or comment is the reconciler's to decide",
}, {
	name:   "Git and the forge are clients, not the loop",
	from:   []string{"internal/gitsource"},
	forbid: []string{"internal/forge", "github.com/google/go-github/...", "code.gitea.io/..."},
	reason: "Git is read and written the same way whatever the forge; the forge's API is internal/forge's",
}, {
	name:   "Git and the forge are clients, not the loop",
	from:   []string{"internal/forge"},
	forbid: []string{"internal/gitsource", "github.com/go-git/..."},
	reason: "the forge is reached through its API only; Git itself is internal/gitsource's",
}, {
	name:   "the loop reaches the world through what it is given",
	from:   []string{"internal/reconciler"},
	forbid: []string{"internal/observer", "internal/executor/...", "internal/kube", "internal/openstack", "github.com/gophercloud/..."},
	reason: "the observer and the executors are passed in as interfaces at the point of use (wired by internal/app), so that the loop runs the same with executors in process or elsewhere",
}, {
	name:   "the commands sit on top",
	from:   []string{"internal/..."},
	except: []string{"internal/app"},
	forbid: []string{"internal/app", "internal/reconciler"},
	reason: "internal/app builds each command, and the loop is one of its parts; below them a package is given what it needs, it never reaches up for it",
}, {
	name:   "cmd only wires",
	from:   []string{"cmd/..."},
	direct: true,
	forbid: []string{"internal/reconciler", "internal/planner", "internal/observer", "internal/executor/...", "internal/kube", "internal/openstack"},
	reason: "cmd parses flags and calls one function of internal/app per command; what a command does lives there",
}}

// pkg is what `go list -deps -json` says of one package.
type pkg struct {
	ImportPath string
	Imports    []string
	Standard   bool
}

// TestImportRules checks every rule against the module's packages as
// `go list` sees them: a package breaking one is named with the import
// that breaks it, the path it comes through and the rule's reason.
func TestImportRules(t *testing.T) {
	pkgs := list(t)
	var ours []string
	for path := range pkgs {
		if rel, ok := relative(path); ok {
			ours = append(ours, rel)
		}
	}
	slices.Sort(ours)
	for _, r := range rules {
		var broken []string
		for _, p := range applies(t, r, ours) {
			broken = append(broken, check(r, pkgs, p)...)
		}
		switch {
		case r.pending != "" && len(broken) > 0:
			t.Logf("rule %q is not enforced yet (%s); it does not hold:\n\t%s", r.name, r.pending, strings.Join(broken, "\n\t"))
		case r.pending != "":
			t.Logf("rule %q now holds: drop its pending mark (%s) so that it is enforced", r.name, r.pending)
		}
		if r.pending == "" {
			for _, b := range broken {
				t.Errorf("%s\n\trule %q: %s", b, r.name, r.reason)
			}
		}
	}
}

// list runs `go list -deps -json` over the module and returns every
// package it names, the module's and their dependencies, by import path.
func list(t *testing.T) map[string]pkg {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the packages: %v", err)
	}
	cmd := exec.Command(goBin, "list", "-deps", "-json=ImportPath,Imports,Standard", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list's output: %v", err)
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

// applies returns the module's packages a rule applies to. A pattern
// naming no package fails the test, so that a package moved or renamed
// does not leave a rule checking nothing.
func applies(t *testing.T, r rule, ours []string) []string {
	t.Helper()
	for _, pattern := range slices.Concat(r.from, r.except, r.forbid, r.only) {
		if isOurs(pattern) && !slices.ContainsFunc(ours, func(p string) bool { return match(pattern, p) }) {
			t.Errorf("rule %q: %q names no package of the module; update the rule (and the doc.go that states it)", r.name, pattern)
		}
	}
	var out []string
	for _, p := range ours {
		if matchAny(r.from, p) && !matchAny(r.except, p) {
			out = append(out, p)
		}
	}
	return out
}

// check returns, for one package, each forbidden import it reaches, with
// the path of imports that reaches it. It does not look past a forbidden
// package: what that one imports is beside the point.
func check(r rule, pkgs map[string]pkg, from string) []string {
	var broken []string
	via := map[string]string{module + "/" + from: ""}
	queue := []string{module + "/" + from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, imp := range pkgs[cur].Imports {
			if _, seen := via[imp]; seen || imp == "C" || imp == "unsafe" {
				continue
			}
			via[imp] = cur
			if forbidden(r, pkgs[imp]) {
				broken = append(broken, from+" imports "+display(imp)+chain(via, cur, from))
				continue
			}
			if !r.direct {
				queue = append(queue, imp)
			}
		}
	}
	return broken
}

// forbidden reports whether a rule forbids importing p.
func forbidden(r rule, p pkg) bool {
	rel, ours := relative(p.ImportPath)
	if r.only != nil {
		if p.Standard {
			return false
		}
		return !ours || !matchAny(r.only, rel)
	}
	for _, pattern := range r.forbid {
		// A pattern of the module's ("internal/...") never matches the
		// standard library's internal packages, nor the reverse.
		if isOurs(pattern) == ours && match(pattern, display(p.ImportPath)) {
			return true
		}
	}
	return false
}

// chain says through which packages an import was reached, when not
// directly.
func chain(via map[string]string, last, from string) string {
	var hops []string
	for p := last; p != module+"/"+from && p != ""; p = via[p] {
		hops = append(hops, display(p))
	}
	if len(hops) == 0 {
		return ""
	}
	slices.Reverse(hops)
	return " (through " + strings.Join(hops, " -> ") + ")"
}

// relative returns an import path relative to the module, and whether it
// is the module's at all.
func relative(path string) (string, bool) {
	return strings.CutPrefix(path, module+"/")
}

// display is an import path as the rules write it.
func display(path string) string {
	if rel, ok := relative(path); ok {
		return rel
	}
	return path
}

// isOurs reports whether a pattern names the module's packages rather than
// another module's or the standard library's.
func isOurs(pattern string) bool {
	return pattern == "..." || strings.HasPrefix(pattern, "internal/") || strings.HasPrefix(pattern, "api/") ||
		strings.HasPrefix(pattern, "cmd/") || strings.HasPrefix(pattern, "hack/")
}

func matchAny(patterns []string, path string) bool {
	return slices.ContainsFunc(patterns, func(pattern string) bool { return match(pattern, path) })
}

// match reports whether path matches pattern: exactly, or as the package
// or a package under it when the pattern ends in "/..."; "..." alone
// matches everything.
func match(pattern, path string) bool {
	if pattern == "..." {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

// TestCheck: the checker names the forbidden import and the path to it,
// stops at it, and tells the module's internal/ from the standard
// library's.
func TestCheck(t *testing.T) {
	ours := func(rel string, imports ...string) pkg {
		return pkg{ImportPath: module + "/" + rel, Imports: imports}
	}
	pkgs := map[string]pkg{}
	for _, p := range []pkg{
		ours("internal/a", module+"/internal/b", "internal/abi", "os"),
		ours("internal/b", "k8s.io/client-go/rest"),
		{ImportPath: "k8s.io/client-go/rest", Imports: []string{"k8s.io/client-go/pkg/version"}},
		{ImportPath: "k8s.io/client-go/pkg/version"},
		{ImportPath: "internal/abi", Standard: true},
		{ImportPath: "os", Standard: true},
	} {
		pkgs[p.ImportPath] = p
	}
	for _, tc := range []struct {
		name string
		r    rule
		want []string
	}{
		{"through", rule{forbid: clients}, []string{"internal/a imports k8s.io/client-go/rest (through internal/b)"}},
		{"direct only", rule{forbid: clients, direct: true}, nil},
		{"ours", rule{forbid: []string{"internal/..."}}, []string{"internal/a imports internal/b"}},
		{"standard library", rule{forbid: []string{"os"}, direct: true}, []string{"internal/a imports os"}},
		{"only", rule{only: []string{"internal/b"}}, []string{"internal/a imports k8s.io/client-go/rest (through internal/b)"}},
		{"only the standard library", rule{only: []string{}}, []string{"internal/a imports internal/b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := check(tc.r, pkgs, "internal/a"); !slices.Equal(got, tc.want) {
				t.Errorf("check = %q, want %q", got, tc.want)
			}
		})
	}
}
