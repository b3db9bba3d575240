//go:build openstack

package deploy_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/testing/ostest"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestInstallOpenStack installs ferry as docs/install.md says, on a
// management cluster whose node is a real kubelet, and ferry's pod, not a
// process of the test's, migrates seed 000 through pull requests on the
// real Gitea. The install: the image `make image` builds, imported into
// the node as it would be pulled; the credentials' Secret created with
// the documented `kubectl create secret`; `kubectl apply -k` of an
// overlay over deploy/ that sets the repository (the pinned kubectl,
// whose kustomize builds the overlays); the plan-namespace RBAC. The
// reconciler's pod then runs under the securityContext deploy/ sets (its
// process's user, group and supplementary group read from the machine),
// its probes pass and it reads its credentials. The world is
// TestRunOpenStack's, reached over a network as a cluster in a data
// centre reaches it: the management API server through the kubernetes
// Service, Gitea on the network's host address, the local OpenStack's
// APIs and the workload cluster's endpoint (a floating IP) through the
// node's route to testenv.HostServices, the real CAPI and CAPO managers
// acting on what the pod creates. Three pull requests approve cluster,
// control plane and workers; each gets its preview and its progress
// comment, and the adoption is checked against the world as it was
// before (ostest.Verify). Last, without deploy/'s fsGroup the same pod
// cannot read its credentials.
func TestInstallOpenStack(t *testing.T) {
	image := makeImage(t)
	h := testenv.NewHost(t)
	lan := h.Network("mgmt")
	f := ostest.NewAdoptableWith(t, "capi-quickstart", testenv.KubeOptions{PKI: testenv.NewPKI(t, "mgmt"), Address: lan.HostIP, Nodes: true})
	mgmt := f.Mgmt
	nodes := h.StartNodes(mgmt, []string{image}, testenv.NodeSpec{Name: "mgmt-1", Network: lan})
	before := f.Record(t)
	testenv.StartManagers(t, mgmt)
	plan := func(approve string) string {
		return f.Plan(approve, "  manifests:\n    cloudControllerManager: {path: manifests/ccm.yaml}\n")
	}
	gt := testenv.StartGiteaOn(t, testenv.SeedDir(t, map[string]string{
		"plans/capi-quickstart.yaml": plan(`""`),
		"manifests/ccm.yaml":         testenv.CCMManifest,
	}), lan.HostIP)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	write(t, kubeconfig, string(mgmt.Kubeconfig(t)))
	kubectl := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, testenv.Kubectl(t), append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	// docs/install.md, in order.
	webhookSecret := randomHex(t)
	write(t, filepath.Join(dir, "git-token"), gt.Token(testenv.GiteaBot))
	write(t, filepath.Join(dir, "forge-token"), gt.Token(testenv.GiteaBot))
	write(t, filepath.Join(dir, "webhook-secret"), webhookSecret)
	kubectl("create", "namespace", "ferry-system")
	kubectl("-n", "ferry-system", "create", "secret", "generic", "ferry-credentials",
		"--from-file=git-token=./git-token", "--from-file=forge-token=./forge-token",
		"--from-file=webhook-secret=./webhook-secret")
	deployDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(dir, "overlay")
	base, err := filepath.Rel(overlay, deployDir) // kustomize takes no absolute path
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(overlay, "kustomization.yaml"), fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
configMapGenerator:
  - name: ferry-config
    namespace: ferry-system
    behavior: merge
    literals:
      - repo=%s
      - forge=gitea
      - forge-url=%s
      - forge-repo=%s/%s
`, base, gt.RepoURL(), gt.URL, gt.Owner, gt.Repo))
	kubectl("apply", "-k", overlay)
	// The plan's cluster is in default.
	kubectl("apply", "-n", "default", "-f", filepath.Join(deployDir, "plan-namespace", "rbac.yaml"))
	kubectl("-n", "ferry-system", "rollout", "status", "deployment/ferry-reconciler", "--timeout=3m")

	var pods corev1.PodList
	if err := mgmt.Client.List(ctx, &pods, client.InNamespace("ferry-system"), client.MatchingLabels{"app.kubernetes.io/name": "ferry-reconciler"}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("reconciler pods: %d, %v", len(pods.Items), err)
	}
	pod := pods.Items[0]
	if !testenv.Serving(&pod) {
		t.Errorf("pod %s is not Ready and Running: %+v", pod.Name, pod.Status.Conditions)
	}
	// The process as the kernel sees it: deploy/'s runAsUser, runAsGroup
	// and fsGroup (a supplementary group, through which it reads its
	// Secret's 0440 files).
	status := testenv.ProcessStatus(t, "/usr/local/bin/reconciler run ")
	for field, want := range map[string]string{"Uid": "65532\t65532\t65532\t65532", "Gid": "65532\t65532\t65532\t65532", "Groups": "65532"} {
		if got := status[field]; got != want {
			t.Errorf("reconciler process %s = %q; want %q (deploy/base/deployment.yaml's securityContext)", field, got, want)
		}
	}
	if status["CapEff"] != "0000000000000000" {
		t.Errorf("reconciler process has capabilities %s; deploy/ drops them all", status["CapEff"])
	}

	// The migration, by the pod: Gitea's webhooks go to it.
	gt.AddWebhook(t, "http://"+pod.Status.PodIP+":9090/", webhookSecret)
	wait := func(what string, done func() (bool, string)) {
		t.Helper()
		var last string
		for ctx.Err() == nil {
			var ok bool
			if ok, last = done(); ok {
				return
			}
			time.Sleep(time.Second)
		}
		t.Fatalf("timed out waiting for %s; last: %s\nthe reconciler pod's log ends:\n%s", what, last,
			tailLines(nodes.ContainerLog("ferry-system", pod.Name, "reconciler"), 40))
	}
	comment := func(pr int, key, want string) string {
		t.Helper()
		var body string
		wait(fmt.Sprintf("a %s comment on #%d with %q", key, pr, want), func() (bool, string) {
			for _, c := range gt.Comments(t, pr) {
				if strings.HasPrefix(c.Body, forge.Marker(key)) {
					body = c.Body
					if c.User.Login != testenv.GiteaBot {
						t.Fatalf("a %s comment by %s, not ferry's bot", key, c.User.Login)
					}
					return strings.Contains(body, want), body
				}
			}
			return false, body
		})
		return body
	}
	for _, phase := range []string{"cluster", "control-plane", "workers"} {
		title := "Approve " + phase
		gt.PushBranch(t, testenv.GiteaMaintainer, "approve-"+phase, title, map[string]string{"plans/capi-quickstart.yaml": plan(phase)})
		pr := gt.OpenPullRequest(t, testenv.GiteaMaintainer, "approve-"+phase, title)
		preview := comment(pr, "preview", "Steps of phase "+phase+":")
		if strings.Contains(preview, "may ferry list") {
			t.Errorf("the preview of #%d could not read the plan's namespace:\n%s", pr, preview)
		}
		gt.MergePullRequest(t, testenv.GiteaReviewer, pr, testenv.MergeCommit)
		t.Logf("the installed reconciler ran phase %s:\n%s", phase, comment(pr, "progress/capi-quickstart", "| "+phase+" | Succeeded |"))
	}
	unpaused := time.Now() // the workers' unpause was before this
	for _, c := range f.VerifyUntil(ctx, before, unpaused, 2*time.Minute) {
		t.Log(c)
		if !c.OK {
			t.Errorf("adoption check failed: %s", c)
		}
	}
	for _, cs := range podStatus(ctx, t, mgmt, pod.Name).Status.ContainerStatuses {
		if cs.RestartCount > 0 {
			t.Errorf("container %s restarted %d times: %+v", cs.Name, cs.RestartCount, cs.LastTerminationState)
		}
	}

	// Without deploy/'s fsGroup the same pod cannot read its
	// credentials: the kubelet writes a Secret's files root-owned, and
	// 0400 (defaultMode) leaves its user out.
	kubectl("-n", "ferry-system", "patch", "deployment", "ferry-reconciler", "--type=json",
		"-p", `[{"op": "remove", "path": "/spec/template/spec/securityContext/fsGroup"}]`)
	wait("a reconciler without fsGroup to fail to read its credentials", func() (bool, string) {
		var pods corev1.PodList
		if err := mgmt.Client.List(ctx, &pods, client.InNamespace("ferry-system")); err != nil {
			t.Fatal(err)
		}
		var logs string
		for _, p := range pods.Items {
			if p.Name != pod.Name && p.Spec.SecurityContext.FSGroup == nil {
				logs += nodes.ContainerLog("ferry-system", p.Name, "reconciler")
			}
		}
		if strings.Contains(logs, "permission denied") {
			t.Logf("without fsGroup: %s", strings.TrimSpace(logs))
			return true, ""
		}
		return false, logs
	})
}

// podStatus reads pod name in ferry-system.
func podStatus(ctx context.Context, t *testing.T, k *testenv.Kube, name string) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := k.Client.Get(ctx, client.ObjectKey{Namespace: "ferry-system", Name: name}, &p); err != nil {
		t.Fatalf("pod %s: %v", name, err)
	}
	return &p
}

// tailLines is the last n lines of s.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// makeImage runs `make image` and returns the tarball it writes.
func makeImage(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("make", "-C", "..", "image")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	path, err := filepath.Abs("../bin/reconciler-image.tar")
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
