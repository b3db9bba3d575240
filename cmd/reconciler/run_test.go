package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferry-dev/ferry/internal/clusterevents"
	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/reconciler"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/status/statusfile"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/fakegithub"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestRunPullRequests drives `reconciler run` through GitHub's flow with
// real backends (API servers, Git server, embedded NATS) and the GitHub
// stand-in: a signed webhook is the only thing that wakes it (the poll
// interval is an hour). Opening a pull request gets a preview comment with
// the steps and a broken file's errors; a push edits it in place; the merge
// runs the approved phase, credits the merger, edits one progress comment
// and sets commit statuses, while the broken file stops nothing; a commit
// that breaks the plan is recorded in its status. Without OpenStack, the
// cloud steps stay in flight (TestRunOpenStack runs the migration to its
// end).
func TestRunPullRequests(t *testing.T) {
	mgmt := orphanedQuickstart(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	plan := func(approve string) string { return testenv.ExamplePlan(t, approve) }
	seed := testenv.SeedDir(t, map[string]string{
		"plans/capi-quickstart.yaml":                        plan(""),
		"manifests/openstack-cloud-controller-manager.yaml": testenv.CCMManifest,
	})
	g := testenv.StartGit(t, seed)
	gh := fakegithub.New("ferry-dev", "plans", "ghp_stand_in_token")
	t.Cleanup(gh.Close)

	r := startRun(t, ctx, g, gh, mgmt, []string{"capi-backup"}, "--interval", "1h", "--no-cloud", "--kinds", "kube,workload", "--comment-interval", "50ms")
	waitFor := r.waitFor
	reader := reconciler.GitStatusStore{Git: &gitsource.Branch{URL: g.URL, Name: statusfile.DefaultBranch}}
	readStatus := func() *status.PlanStatus {
		st, err := reader.Read(ctx, "capi-quickstart")
		if err != nil {
			return nil
		}
		return st
	}
	waitFor("the first status commit", func() bool { return readStatus() != nil })

	// Unsigned and mis-signed webhooks are refused.
	webhookURL := r.webhookURL
	if code, err := fakegithub.Deliver(ctx, webhookURL, []byte("wrong-secret"), "push", map[string]any{}); err != nil || code != http.StatusUnauthorized {
		t.Errorf("mis-signed webhook: %d, %v; want 401", code, err)
	}
	resp, err := http.Post(webhookURL, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unsigned webhook: %d; want 401", resp.StatusCode)
	}

	repo := testenv.NewPlansRepo(t, g, gh)
	repo.WebhookURL, repo.WebhookSecret = r.webhookURL, r.webhookSecret
	comment := func(pr int, key string) (fakegithub.Comment, int) {
		var found fakegithub.Comment
		n := 0
		for _, c := range gh.Comments(pr) {
			if strings.HasPrefix(c.Body, forge.Marker(key)) {
				found, n = c, n+1
			}
		}
		return found, n
	}

	// Opening a pull request: a preview with the steps and the errors.
	broken := "apiVersion: ferry.dev/v1alpha1\nkind: MigrationPlan\nmetadata:\n  name: broken\nspec:\n  strategy: adoptt\n"
	head := repo.OpenPR(1, "Approve cluster", "alice", map[string]string{
		"plans/capi-quickstart.yaml": plan("cluster"),
		"plans/broken.yaml":          broken,
	})
	waitFor("the preview comment", func() bool {
		c, _ := comment(1, "preview")
		return strings.Contains(c.Body, head[:12])
	})
	preview, _ := comment(1, "preview")
	for _, want := range []string{
		"`plans/capi-quickstart.yaml`: plan `capi-quickstart`", "Approved up to: cluster", "Steps of phase cluster:",
		"copy-secret Secret default/capi-quickstart-cloud-config", "Next: ", "`plans/broken.yaml`: invalid",
	} {
		if !strings.Contains(preview.Body, want) {
			t.Errorf("preview lacks %q:\n%s", want, preview.Body)
		}
	}
	if !regexp.MustCompile(`plans/broken\.yaml:6: spec\.strategy: `).MatchString(preview.Body) {
		t.Errorf("preview does not name the broken file's line and field:\n%s", preview.Body)
	}

	// A push to the pull request edits the same comment.
	head = repo.PushPR(1, "Review: note who runs it", "alice", map[string]string{
		"plans/capi-quickstart.yaml": "# Run by the platform team.\n" + plan("cluster"),
	})
	waitFor("the preview of the second push", func() bool {
		c, _ := comment(1, "preview")
		return strings.Contains(c.Body, head[:12])
	})
	if _, n := comment(1, "preview"); n != 1 {
		t.Errorf("%d preview comments on #1; want 1, edited in place", n)
	}

	// The merge approves cluster: it runs, credited to the merger, with
	// the broken file on the branch.
	merge := repo.MergePR(1, "bob")
	waitFor("a copy-secret step to succeed", func() bool {
		st := readStatus()
		if st == nil || st.Revision != merge {
			return false
		}
		for _, s := range st.Phase("cluster").Steps {
			if s.Action == step.CopySecret && s.State == status.StepSucceeded {
				return true
			}
		}
		return false
	})
	st := readStatus()
	if len(st.ApprovedBy) != 1 || !approvedAs(st.ApprovedBy[0], status.Approval{Phase: "cluster", By: "bob", PR: 1, Commit: merge}) {
		t.Errorf("approvedBy = %+v; want cluster by bob in #1 at %s, with the content's digest", st.ApprovedBy, merge)
	}
	waitFor("the progress comment", func() bool {
		c, _ := comment(1, "progress/capi-quickstart")
		return strings.Contains(c.Body, "bob (#1)") && strings.Contains(c.Body, "copy-secret") && strings.Contains(c.Body, "Succeeded")
	})
	if _, n := comment(1, "progress/capi-quickstart"); n != 1 {
		t.Errorf("%d progress comments; want 1, edited in place", n)
	}
	waitFor("a commit status for phase cluster on the merge commit", func() bool {
		for _, s := range gh.Statuses() {
			if s.SHA == merge && s.Context == "ferry/capi-quickstart/cluster" && s.State == forge.StatePending {
				return true
			}
		}
		return false
	})

	// A commit breaks the plan: recorded in its status, with the line.
	bad := repo.Commit("Typo", "carol", map[string]string{"plans/capi-quickstart.yaml": strings.Replace(plan("cluster"), "strategy: adopt", "strategy: adopd", 1)})
	waitFor("the invalid plan in the status", func() bool {
		st := readStatus()
		return st != nil && st.Revision == bad && len(st.Invalid) == 1 && strings.HasPrefix(st.Invalid[0], "plans/capi-quickstart.yaml:")
	})

	// Nothing moved: a poll asks GitHub nothing.
	listCalls := func() int {
		n := 0
		for _, c := range gh.Calls(http.MethodGet) {
			if strings.HasSuffix(c.Path, "/pulls") {
				n++
			}
		}
		return n
	}
	before := listCalls()
	if code, err := fakegithub.Deliver(ctx, r.webhookURL, r.webhookSecret, "push", map[string]any{}); err != nil || code != http.StatusAccepted {
		t.Fatalf("webhook: %d, %v", code, err)
	}
	time.Sleep(2 * time.Second)
	if n := listCalls() - before; n != 0 {
		t.Errorf("an idle poll listed pull requests %d times; want 0", n)
	}
	// The orphaned cluster has no Cluster object yet (the phase creates
	// it after the cloud's steps): its phase's Events have nowhere to go
	// and are dropped, quietly (TestRunOnGitea shows them on a Cluster).
	var evs corev1.EventList
	if err := mgmt.Client.List(ctx, &evs); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.Source.Component == clusterevents.Component {
			t.Errorf("an event with no Cluster to go on: %s %s/%s %s: %s", e.InvolvedObject.Kind, e.Namespace, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}

	var all strings.Builder
	for _, c := range gh.Comments(1) {
		all.WriteString(c.Body)
	}
	for _, s := range gh.Statuses() {
		all.WriteString(s.Description)
	}
	all.WriteString(r.log())
	if strings.Contains(all.String(), fakePassword) || strings.Contains(all.String(), gh.Token) {
		t.Error("a secret reached a comment, a status or the log")
	}
}

// orphanedQuickstart starts a management and a workload API server with
// seed 000's orphaned capi-quickstart cluster, and the OpenStack
// credentials the example plan copies; it returns the management one.
func orphanedQuickstart(t *testing.T) *testenv.Kube {
	mgmt := testenv.StartKube(t)
	workload := testenv.StartKube(t)
	testenv.Orphan(t, mgmt, workload, testenv.OrphanedCluster{
		Name: "capi-quickstart", Namespace: "default", BackupNamespace: "capi-backup",
		ControlPlaneNodes: []string{"capi-quickstart-control-plane-7xk2p"},
		WorkerNodes:       []string{"capi-quickstart-md-0-wq8fz"},
		KubeletVersion:    "v1.31.4",
	})
	mustCreate(t, mgmt, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ferry-system"}})
	mustCreate(t, mgmt, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ferry-system", Name: "openstack-credentials"},
		Data: map[string][]byte{
			"clouds.yaml": []byte("clouds:\n  openstack:\n    auth:\n      password: " + fakePassword + "\n"),
			"cacert":      testenv.NewPKI(t, "cloud").CA.Cert,
		},
	})
	return mgmt
}

// running is a `reconciler run` started by startRun.
type running struct {
	t             *testing.T
	ctx           context.Context
	webhookURL    string
	webhookSecret []byte
	mu            sync.Mutex
	logs          bytes.Buffer
	// exited is closed when the command returns, with its exit code in
	// code: a wait ends at once rather than at the test's deadline.
	exited chan struct{}
	code   int
	// args are the command line; stopRun stops the command.
	args    []string
	stopRun context.CancelFunc
}

// startRun runs `reconciler run` until the test ends (then it must exit
// 0): on g's repository, with in-process executors and the embedded NATS,
// the management cluster mgmt, a webhook endpoint, and gh as GitHub; extra
// flags come last. It runs as deploy/'s service account, with deploy/'s
// RBAC and admission policy applied to mgmt and its plan-namespace RBAC to
// default and namespaces: a migration that needs more than that fails.
func startRun(t *testing.T, ctx context.Context, g *testenv.Git, gh *fakegithub.Server, mgmt *testenv.Kube, namespaces []string, extra ...string) *running {
	t.Helper()
	return startRunWith(t, ctx, mgmt, namespaces, gh.Token, append([]string{"--repo", g.URL,
		"--github-repo", gh.Owner + "/" + gh.Repo, "--github-api-url", gh.URL}, extra...)...)
}

// startRunWith is startRun with the repository and forge flags in args,
// and token in the file that --forge-token-file names.
func startRunWith(t *testing.T, ctx context.Context, mgmt *testenv.Kube, namespaces []string, token string, extra ...string) *running {
	t.Helper()
	testenv.ApplyKustomization(t, mgmt, "../../deploy")
	for _, ns := range append([]string{"default"}, namespaces...) {
		testenv.ApplyKustomizationIn(t, mgmt, "../../deploy/plan-namespace", ns)
	}
	dir := t.TempDir()
	asServiceAccount := mgmt.KubeconfigAs(t, "system:serviceaccount:ferry-system:ferry-reconciler")
	for name, content := range map[string]string{"kubeconfig": string(asServiceAccount), "token": token + "\n", "secret": "webhook-secret\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hook := testenv.FreeAddr(t)
	r := &running{t: t, ctx: ctx, webhookURL: "http://" + hook + "/", webhookSecret: []byte("webhook-secret")}
	r.args = append([]string{"run", "--kubeconfig", filepath.Join(dir, "kubeconfig"), "--data-dir", t.TempDir(),
		"--metrics-addr", "", "--webhook-addr", hook, "--webhook-secret-file", filepath.Join(dir, "secret"),
		"--forge-token-file", filepath.Join(dir, "token")}, extra...)
	r.start()
	t.Cleanup(func() {
		r.stopRun()
		if <-r.exited; r.code != 0 && !t.Failed() {
			t.Errorf("reconciler run exited %d; its log ends:\n%s", r.code, tail(r.log(), 30))
		}
	})
	return r
}

// start runs the command in the background and waits until its webhook
// listens (after the informers synced), if it has one.
func (r *running) start() {
	r.t.Helper()
	runCtx, stop := context.WithCancel(r.ctx)
	exited := make(chan struct{})
	r.stopRun, r.exited = stop, exited
	go func() {
		defer close(exited)
		r.code = runContext(runCtx, r.args, &bytes.Buffer{}, &lockedWriter{mu: &r.mu, w: &r.logs})
	}()
	if r.webhookURL == "" {
		return // an executor: it listens on nothing
	}
	hook := strings.TrimSuffix(strings.TrimPrefix(r.webhookURL, "http://"), "/")
	r.waitFor("the webhook endpoint", func() bool {
		c, err := net.DialTimeout("tcp", hook, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// restart stops the command as a rolling update would (it must exit 0)
// and starts it again with the same flags and data directory; its log
// goes on after a line that marks the restart.
func (r *running) restart() {
	r.t.Helper()
	r.stopRun()
	if <-r.exited; r.code != 0 {
		r.fatalf("reconciler run exited %d when stopped for a restart", r.code)
	}
	r.mu.Lock()
	r.logs.WriteString("--- restarted ---\n")
	r.mu.Unlock()
	r.start()
}

// log returns what the reconciler logged so far.
func (r *running) log() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.logs.String()
}

// fatalf fails the test with the end of the reconciler's log.
func (r *running) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf(format+"\nreconciler log:\n%s", append(args, tail(r.log(), 60))...)
}

// waitFor polls cond until it holds, or fails the test when ctx ends or
// the reconciler exits (a port taken by another process, say): nothing
// would come after that.
func (r *running) waitFor(what string, cond func() bool) {
	r.t.Helper()
	for r.ctx.Err() == nil {
		if cond() {
			return
		}
		select {
		case <-r.exited:
			r.fatalf("reconciler run exited %d while waiting for %s", r.code, what)
		case <-time.After(100 * time.Millisecond):
		}
	}
	r.fatalf("timed out waiting for %s", what)
}

// clusterEvents returns the Events on the Cluster "namespace/name" as
// `kubectl describe cluster` finds them, by reason: "Type Reason xCount:
// Message". Two Events with one reason fail the test: a repeat must be
// counted on the first.
func clusterEvents(t *testing.T, ctx context.Context, mgmt *testenv.Kube, cluster string) map[string]string {
	t.Helper()
	list, err := clusterevents.List(ctx, mgmt.Client, cluster)
	if err != nil {
		t.Fatalf("events of Cluster %s: %v", cluster, err)
	}
	out := map[string]string{}
	for _, e := range list {
		if prev, dup := out[e.Reason]; dup {
			t.Fatalf("two %s Events on Cluster %s, a repeat not counted:\n%s\n%s x%d: %s", e.Reason, cluster, prev, e.Type, e.Count, e.Message)
		}
		if e.Source.Component == clusterevents.Component {
			out[e.Reason] = fmt.Sprintf("%s x%d: %s", e.Type, e.Count, e.Message)
		}
	}
	return out
}

func phasesAre(st *status.PlanStatus, want map[string]status.PhaseState) bool {
	got := map[string]status.PhaseState{}
	for _, p := range st.Phases {
		got[p.Name] = p.State
	}
	for name, state := range want {
		if got[name] != state {
			return false
		}
	}
	return true
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// approvedAs reports whether a is want with the digest of the content it
// approved (a SHA-256 in hex, which only the forge's check sets).
func approvedAs(a, want status.Approval) bool {
	digest := a.Content
	a.Content = ""
	_, err := hex.DecodeString(digest)
	return a == want && len(digest) == 64 && err == nil
}
