package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/reconciler"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/status/statusfile"
	"github.com/ferry-dev/ferry/internal/testing/fakegithub"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// docExample is one `reconciler …` command of the README or the docs.
type docExample struct {
	page string
	line int
	args []string
}

func (e docExample) String() string {
	return fmt.Sprintf("%s:%d: reconciler %s", e.page, e.line, strings.Join(e.args, " "))
}

// docExamples finds every reconciler command in the fenced blocks of the
// README and the docs (a `$ ` prompt dropped, continued lines joined, a
// trailing comment cut), and in the Examples of the help texts that
// docs/commands.md shows.
func docExamples(t *testing.T) []docExample {
	t.Helper()
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../../README.md")
	comment := regexp.MustCompile(`\s+#.*$`)
	var out []docExample
	seen := map[string]bool{}
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		fenced := false
		for i := 0; i < len(lines); i++ {
			l := lines[i]
			if strings.HasPrefix(l, "```") {
				fenced = !fenced
				continue
			}
			cmd := strings.TrimPrefix(strings.TrimSpace(l), "$ ")
			// A help text's usage line is a synopsis, not an example.
			usage := i > 0 && strings.TrimSpace(lines[i-1]) == "Usage:"
			if !fenced || usage || !strings.HasPrefix(cmd, "reconciler ") {
				continue
			}
			start := i
			for strings.HasSuffix(cmd, `\`) && i+1 < len(lines) {
				i++
				cmd = strings.TrimSuffix(cmd, `\`) + " " + strings.TrimSpace(lines[i])
			}
			cmd = comment.ReplaceAllString(cmd, "")
			if seen[cmd] {
				continue
			}
			seen[cmd] = true
			out = append(out, docExample{page: filepath.Base(page), line: start + 1, args: strings.Fields(cmd)[1:]})
		}
	}
	return out
}

// TestDocExamples runs every command example of the README and the docs,
// as written, against servers on this machine: the repositories and the
// forges they name are a local Git server, the GitHub stand-in and a real
// Gitea, the kubeconfig a real API server's, the NATS URL an embedded
// server's (with no credentials: --nats-creds is dropped), the files
// they name hold what they should. One-shot commands must exit 0; `run`
// must become ready (/readyz) and `executor` keep running, and both exit
// 0 when stopped. A flag that was renamed, a value that no longer parses
// or a command that fails as documented fails here.
func TestDocExamples(t *testing.T) {
	examples := docExamples(t)
	if len(examples) < 10 {
		t.Fatalf("found %d examples in the README and the docs; the parser lost them", len(examples))
	}
	plans, err := filepath.Abs("../../plans")
	if err != nil {
		t.Fatal(err)
	}
	kube := testenv.StartKube(t)
	if err := kube.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ferry-system"}}); err != nil {
		t.Fatal(err)
	}
	nats := testenv.StartNATS(t)
	// The streams, as a reconciler makes them: an executor waits for them.
	if err := events.EnsureStreams(t.Context(), nats.JetStream); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, name := range []string{"capi-quickstart.yaml", "kamaji-quickstart.yaml", "vsphere-gateway.yaml", "vsphere-workers.yaml"} {
		data, err := os.ReadFile(filepath.Join(plans, name))
		if err != nil {
			t.Fatal(err)
		}
		files["plans/"+name] = string(data)
	}
	seed := testenv.SeedDir(t, files)
	g := testenv.StartGit(t, seed)
	gitea := testenv.StartGitea(t, seed)
	gh := fakegithub.New("acme", "migrations", "ghp_docs_example_token")
	t.Cleanup(gh.Close)
	// A finished status of the plan the examples name, so that status
	// (and --watch) has something to show and ends.
	done := &planner.Result{Plan: "capi-quickstart", Approve: "workers", Phases: []planner.Phase{
		{Name: "cluster", State: planner.Succeeded, Done: 11},
		{Name: "control-plane", State: planner.Succeeded, Done: 13},
		{Name: "workers", State: planner.Succeeded, Done: 21},
	}}
	st := status.FromResult(nil, done, "121ac0a766730000000000000000000000000000", time.Date(2026, 11, 22, 8, 52, 58, 0, time.UTC))
	store := reconciler.GitStatusStore{Git: &gitsource.Branch{URL: g.URL, Name: statusfile.DefaultBranch, CacheDir: t.TempDir()}}
	if _, err := store.Write(t.Context(), []*status.PlanStatus{st}); err != nil {
		t.Fatal(err)
	}
	// The working directory is a checkout of the plans repository: the
	// examples name plans/… and file://$PWD.
	work := t.TempDir()
	if out, err := exec.Command("git", "clone", "-q", g.URL, work).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v: %s", err, out)
	}
	t.Chdir(work)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	kubeconfig := write("kubeconfig", string(kube.Kubeconfig(t)))
	// An example without --kubeconfig uses the user's, as kubectl does.
	t.Setenv("KUBECONFIG", kubeconfig)
	secret := write("webhook-secret", "docs-example-secret\n")

	for _, ex := range examples {
		t.Run(fmt.Sprintf("%s:%d", ex.page, ex.line), func(t *testing.T) {
			onGitea := slices.ContainsFunc(ex.args, func(a string) bool { return strings.Contains(a, "gitea.example.com") })
			token := write("token", gh.Token+"\n")
			if onGitea {
				token = write("token", gitea.Token(testenv.GiteaBot)+"\n")
			}
			var args []string
			for i := 0; i < len(ex.args); i++ {
				a := strings.ReplaceAll(ex.args[i], "$PWD", work)
				flag, value := a, ""
				if strings.HasPrefix(a, "--") && i+1 < len(ex.args) && !strings.HasPrefix(ex.args[i+1], "-") && takesValue(flag) {
					i++
					value = strings.ReplaceAll(ex.args[i], "$PWD", work)
				}
				switch flag {
				case "--repo":
					switch {
					case strings.HasPrefix(value, "file://"):
					case onGitea:
						value = gitea.RepoURL()
					default:
						value = g.URL
					}
				case "--git-token-file", "--forge-token-file":
					value = token
				case "--webhook-secret-file":
					value = secret
				case "--webhook-addr":
					value = testenv.FreeAddr(t)
				case "--kubeconfig":
					value = kubeconfig
				case "--nats-url":
					value = nats.URL
				case "--nats-creds":
					continue
				case "--forge-url":
					value = gitea.URL
				case "--forge-repo":
					value = gh.Owner + "/" + gh.Repo
					if onGitea {
						value = gitea.Owner + "/" + gitea.Repo
					}
				}
				args = append(args, flag)
				if value != "" {
					args = append(args, value)
				}
			}
			if slices.Contains(args, "--forge-repo") && !slices.Contains(args, "--forge-url") {
				// github.com is not reachable here: the stand-in's URL, as
				// for GitHub Enterprise.
				args = append(args, "--forge-url", gh.URL)
			}
			switch args[0] {
			case "run":
				metrics := testenv.FreeAddr(t)
				args = append(args, "--metrics-addr", metrics, "--data-dir", t.TempDir())
				runExample(t, ex, args, "http://"+metrics+"/readyz")
			case "executor":
				args = append(args, "--data-dir", t.TempDir())
				runExample(t, ex, args, "")
			default:
				var stdout, stderr bytes.Buffer
				if code := run(args, &stdout, &stderr); code != 0 {
					t.Errorf("%s\nas run here: reconciler %s\nexited %d; stderr:\n%s", ex, strings.Join(args, " "), code, tail(stderr.String(), 20))
				}
			}
		})
	}
}

// takesValue reports whether a flag of some command takes a value.
func takesValue(flag string) bool {
	return !slices.Contains([]string{"--leader-elect", "--no-cloud", "--watch", "-w", "--pprof", "--executors", "--allow-push-approvals", "--ssh-insecure-ignore-host-key", "--help"}, flag)
}

// runExample runs a long-running command until it is ready (readyz
// answers 200) or, without readyz, for five seconds, then stops it: it
// must not exit before, and must exit 0 when stopped.
func runExample(t *testing.T, ex docExample, args []string, readyz string) {
	t.Helper()
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var mu sync.Mutex
	var log bytes.Buffer
	stderr := func() string { mu.Lock(); defer mu.Unlock(); return log.String() }
	exited := make(chan int, 1)
	go func() { exited <- runContext(ctx, args, &bytes.Buffer{}, &lockedWriter{mu: &mu, w: &log}) }()
	deadline := time.After(90 * time.Second)
	if readyz == "" {
		deadline = time.After(5 * time.Second)
	}
	client := &http.Client{Timeout: 2 * time.Second}
	for ready := false; !ready; {
		select {
		case code := <-exited:
			t.Fatalf("%s\nas run here: reconciler %s\nexited %d before it was stopped; stderr:\n%s", ex, strings.Join(args, " "), code, tail(stderr(), 20))
		case <-deadline:
			if readyz != "" {
				t.Fatalf("%s\nas run here: reconciler %s\nnot ready after 90s; stderr:\n%s", ex, strings.Join(args, " "), tail(stderr(), 20))
			}
			ready = true
		case <-time.After(200 * time.Millisecond):
			if readyz == "" {
				continue
			}
			if resp, err := client.Get(readyz); err == nil {
				resp.Body.Close()
				ready = resp.StatusCode == http.StatusOK
			}
		}
	}
	stop()
	if code := <-exited; code != 0 {
		t.Errorf("%s: exited %d when stopped; stderr:\n%s", ex, code, tail(stderr(), 20))
	}
}
