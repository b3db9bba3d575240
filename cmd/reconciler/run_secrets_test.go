package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/clusterevents"
	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/reconciler"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/status/statusfile"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/fakegithub"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestRunLetsNoSecretOut is the safety rule "secrets never appear in
// logs, events, Git commits, pull-request comments or Kubernetes Events"
// checked on `reconciler run` as a team sees it. Secrets are planted
// where ferry reads them: a cloud password, a password in the auth_url's
// user information and an application credential secret in the
// clouds.yaml of the plan's identity Secret, the forge token in the token
// file, the webhook secret in its file. Then errors that quote them are
// provoked:
//
//   - the copy of the identity Secret fails for good: an admission policy
//     refuses it with a message that quotes the clouds.yaml as the object
//     carries it (base64), as an admission webhook that shows the object
//     it refused does. The reconciler does not read the cloud itself
//     (--no-cloud), so the Secret's values reach the process first in the
//     kube executor, as in a kube executor replica of the distributed
//     layout;
//   - after `/ferry retry`, the keypair step authenticates at an identity
//     endpoint that answers 400 with the request echoed, password and
//     all, reached through an auth_url with a password in it;
//   - the forge answers a comment with a 500 whose message quotes the
//     token;
//   - a webhook arrives with the webhook secret in its headers and body,
//     as from a forge set up to send the secret itself.
//
// Then everything is read: every request sent to the forge (comments,
// their edits, commit statuses), every commit and file of the plans
// repository with its ferry/status branch, every Event in the management
// cluster, the process's log, its /metrics, /healthz and /readyz, and
// what it keeps on disk (the embedded NATS store, the Git caches). No
// planted value may appear in any of them, as it is or as JSON, a URL or
// base64 (inside a longer encoded text too) carry it; and each error must
// be seen to have happened, scrubbed, so that the test cannot pass by
// provoking nothing.
func TestRunLetsNoSecretOut(t *testing.T) {
	secrets := plantedSecrets{
		"the cloud password":                "planted&cloud-Pa55w0rd-3c9e",
		"the auth_url's password":           "planted-url-Pa55w0rd-7d21",
		"the application credential secret": "planted-appcred-s3cret-a4f0",
		"the forge token":                   "ghp_plantedForgeToken5b8e0d",
		"the webhook secret":                "planted-webhook-s3cret-e61c",
	}
	keystone, echoed := startEchoingKeystone(t)
	authURL := strings.Replace(keystone, "http://", "http://capo:"+secrets["the auth_url's password"]+"@", 1) + "/v3"
	cloudsYAML := fmt.Sprintf(`clouds:
  openstack:
    auth:
      auth_url: %[1]s
      username: capo
      password: %[2]q
      project_name: k8s
      user_domain_name: Default
      project_domain_name: Default
    region_name: RegionOne
  openstack-ci:
    auth_type: v3applicationcredential
    auth:
      auth_url: %[1]s
      application_credential_id: ac-ci
      application_credential_secret: %[3]s
    region_name: RegionOne
`, authURL, secrets["the cloud password"], secrets["the application credential secret"])

	mgmt := orphanedQuickstart(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var creds corev1.Secret
	if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: "ferry-system", Name: "openstack-credentials"}, &creds); err != nil {
		t.Fatal(err)
	}
	creds.Data["clouds.yaml"] = []byte(cloudsYAML)
	if err := mgmt.Client.Update(ctx, &creds); err != nil {
		t.Fatal(err)
	}
	// The Cluster object is back, so that ferry's Events have somewhere
	// to go.
	mustCreate(t, mgmt, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "capi-quickstart"}})
	const cloudConfig = "capi-quickstart-cloud-config"
	outage := refuseSecretQuoting(t, mgmt, cloudConfig, "clouds.yaml")

	seed := testenv.SeedDir(t, map[string]string{
		"plans/capi-quickstart.yaml":                        testenv.ExamplePlan(t, ""),
		"manifests/openstack-cloud-controller-manager.yaml": testenv.CCMManifest,
	})
	g := testenv.StartGit(t, seed)
	gh := fakegithub.New("ferry-dev", "plans", secrets["the forge token"])
	t.Cleanup(gh.Close)
	hookSecret := filepath.Join(t.TempDir(), "webhook-secret")
	if err := os.WriteFile(hookSecret, []byte(secrets["the webhook secret"]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	metrics := testenv.FreeAddr(t)
	// The flags after startRun's own override its webhook secret file and
	// its metrics address. The loop polls: a pull request's comments are
	// read at most every 10 s, so the webhook of a command may find them
	// read too recently, and the poll after that finds it.
	r := startRun(t, ctx, g, gh, mgmt, []string{"capi-backup"}, "--interval", "2s", "--no-cloud", "--comment-interval", "50ms",
		"--webhook-secret-file", hookSecret, "--metrics-addr", metrics)
	r.webhookSecret = []byte(secrets["the webhook secret"])
	reader := reconciler.GitStatusStore{Git: &gitsource.Branch{URL: g.URL, Name: statusfile.DefaultBranch}}
	stepOf := func(action step.Action) *status.StepStatus {
		st, err := reader.Read(ctx, "capi-quickstart")
		if err != nil {
			return nil
		}
		for _, s := range st.Phase("cluster").Steps {
			if s.Action == action && (action != step.CopySecret || strings.HasSuffix(s.Key, "/"+cloudConfig)) {
				return &s
			}
		}
		return nil
	}

	// The forge fails the first comment with its request quoted, token
	// included; the comment is sent again.
	gh.Fail(http.MethodPost, "/comments", http.StatusInternalServerError, nil,
		`{"message": "could not process POST /issues/1/comments with Authorization: Bearer `+secrets["the forge token"]+`"}`)
	repo := testenv.NewPlansRepo(t, g, gh)
	repo.WebhookURL, repo.WebhookSecret = r.webhookURL, r.webhookSecret
	repo.OpenPR(1, "Approve cluster", "alice", map[string]string{"plans/capi-quickstart.yaml": testenv.ExamplePlan(t, "cluster")})
	r.waitFor("the preview comment, sent again after the forge's 500", func() bool { return len(gh.Comments(1)) > 0 })

	// The merge runs phase cluster; the refused copy fails it for good.
	repo.MergePR(1, "bob")
	r.waitFor("the copy of the identity Secret to fail", func() bool {
		s := stepOf(step.CopySecret)
		return s != nil && s.State == status.StepFailed
	})
	if s := stepOf(step.CopySecret); !strings.Contains(s.LastError, "denied request: refused, quoting the object: ***") {
		t.Errorf("the copy failed, but not on the policy that quotes the Secret, or with the quote not masked: %q", s.LastError)
	} else {
		t.Logf("the copy's error, as the status has it: %s", s.LastError)
	}

	// The outage over, a retry copies it, and the keypair step meets the
	// identity endpoint that echoes what it is sent.
	outage()
	gh.AddComment(1, "alice", "/ferry retry")
	if code, err := fakegithub.Deliver(ctx, r.webhookURL, r.webhookSecret, "issue_comment", map[string]any{}); err != nil || code != http.StatusAccepted {
		t.Fatalf("issue_comment webhook: %d, %v", code, err)
	}
	r.waitFor("the keypair step to fail at the identity endpoint", func() bool {
		s := stepOf(step.EnsureKeypair)
		return s != nil && strings.Contains(s.LastError, "but got 400 instead")
	})
	if s := stepOf(step.EnsureKeypair); echoed.Load() == 0 || !strings.Contains(s.LastError, "malformed request from capo:***") {
		t.Errorf("the identity endpoint echoed nothing (%d requests), or the echo is not masked: %q", echoed.Load(), s.LastError)
	} else {
		t.Logf("the keypair step's error, as the status has it: %s", s.LastError)
	}

	// A webhook that carries the secret itself, in its headers and body.
	misdelivered := `{"zen": "the secret is ` + secrets["the webhook secret"] + `"}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.webhookURL, strings.NewReader(misdelivered))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-Hub-Signature-256", "sha256="+secrets["the webhook secret"])
	req.Header.Set("X-Gitlab-Token", secrets["the webhook secret"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a webhook signed with the secret itself: %d; want 401", resp.StatusCode)
	}

	// The errors reached every sink, scrubbed: the Event of the failed
	// step, the progress comment, the log.
	var stepFailed string
	r.waitFor("the StepFailed Event and the progress comment of the keypair step", func() bool {
		list, err := clusterevents.List(ctx, mgmt.Client, "default/capi-quickstart")
		if err != nil {
			return false
		}
		for _, e := range list {
			if e.Reason == clusterevents.ReasonStepFailed {
				stepFailed = e.Message
			}
		}
		progress := ""
		for _, c := range gh.Comments(1) {
			if strings.Contains(c.Body, "ensure-keypair") {
				progress = c.Body
			}
		}
		return stepFailed != "" && strings.Contains(progress, "but got 400 instead")
	})
	for what, text := range map[string]string{
		"the StepFailed Event": stepFailed,
		"the log":              r.log(),
	} {
		if !strings.Contains(text, "denied request: refused, quoting the object: ***") {
			t.Errorf("%s does not quote the refusal, masked:\n%s", what, tail(text, 20))
		}
	}
	if !strings.Contains(r.log(), "forge: update failed; retrying") {
		t.Error("the forge's 500 is not in the log")
	}

	// Everything the team sees, and what the process keeps on disk.
	seen := map[string]string{"the log": r.log()}
	for i, c := range gh.Calls("") {
		seen[fmt.Sprintf("request %d to the forge, %s %s", i, c.Method, c.Path)] = c.Path + "?" + c.Query + "\n" + c.Body
	}
	for i, c := range gh.Comments(1) {
		seen[fmt.Sprintf("comment %d", i)] = c.Body
	}
	for i, s := range gh.Statuses() {
		seen[fmt.Sprintf("commit status %d", i)] = s.Description + " " + s.TargetURL
	}
	gitObjects(t, g.Dir, seen)
	var evs corev1.EventList
	if err := mgmt.Client.List(ctx, &evs); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		b, _ := json.Marshal(e)
		seen["Event "+e.Namespace+"/"+e.Name] = string(b)
	}
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		seen["http://"+metrics+path] = get(t, ctx, "http://"+metrics+path)
	}
	dataDir := r.args[slices.Index(r.args, "--data-dir")+1]
	filesUnder(t, dataDir, seen)

	scanned := 0
	for where, text := range seen {
		scanned += len(text)
		for _, found := range secrets.in(text) {
			t.Errorf("%s holds %s", where, found)
		}
	}
	t.Logf("%d planted values looked for in %d texts, %d KiB", len(secrets), len(seen), scanned/1024)
	if !strings.Contains(seen["http://"+metrics+"/metrics"], "ferry_steps_total") {
		t.Errorf("/metrics shows no step:\n%s", tail(seen["http://"+metrics+"/metrics"], 20))
	}
}

// plantedSecrets are secret values a test planted, by what they are.
type plantedSecrets map[string]string

// in names each planted value text holds, as it is or in a form it takes
// once quoted (testenv.SecretForms: JSON, a URL, base64 at any alignment).
func (p plantedSecrets) in(text string) []string {
	var found []string
	for what, v := range p {
		for _, form := range testenv.SecretForms(v) {
			if strings.Contains(text, form) {
				found = append(found, fmt.Sprintf("%s (as %q)", what, form))
				break
			}
		}
	}
	slices.Sort(found)
	return found
}

// startEchoingKeystone starts a stand-in for an OpenStack identity
// endpoint, for the error path only: it answers every request 400 with
// what it was sent, the basic-auth credentials of the URL and the body
// (the password), as a verbose server or a proxy in front of it does. It
// returns its URL and a count of the requests it echoed.
func startEchoingKeystone(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	var echoed atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16))
		user, pass, _ := r.BasicAuth()
		echoed.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error": {"code": 400, "message": "malformed request from %s:%s", "request": %s}}`, user, pass, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &echoed
}

// refuseSecretQuoting makes mgmt refuse to create the Secret name with a
// message that quotes the value of the Secret's key as the object carries
// it (base64; CEL sees a Secret's data so), as an admission webhook that
// shows what it refused does, and returns what ends the refusal.
func refuseSecretQuoting(t *testing.T, mgmt *testenv.Kube, name, key string) func() {
	t.Helper()
	return refuseSecretCreate(t, mgmt, "quoting", admissionregistrationv1.Validation{
		Expression:        "object.metadata.name != '" + name + "'",
		MessageExpression: "'refused, quoting the object: ' + string(object.data['" + key + "']).replace('\\n', ' ')",
	})
}

// gitObjects adds every commit message and blob of the bare repository at
// dir (every branch, ferry/status with its history included) to seen.
func gitObjects(t *testing.T, dir string, seen map[string]string) {
	t.Helper()
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	commits, err := repo.CommitObjects()
	if err != nil {
		t.Fatal(err)
	}
	if err := commits.ForEach(func(c *object.Commit) error {
		seen["commit "+c.Hash.String()[:10]] = c.Message
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	blobs, err := repo.BlobObjects()
	if err != nil {
		t.Fatal(err)
	}
	if err := blobs.ForEach(func(b *object.Blob) error {
		rd, err := b.Reader()
		if err != nil {
			return err
		}
		defer rd.Close()
		data, err := io.ReadAll(rd)
		seen["blob "+b.Hash.String()[:10]] = string(data)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// filesUnder adds every file under dir to seen.
func filesUnder(t *testing.T, dir string, seen map[string]string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		seen[path] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// get returns the body of a GET of u, whatever its status.
func get(t *testing.T, ctx context.Context, u string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
