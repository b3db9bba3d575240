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

	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestInstallOnRealNodes installs ferry as docs/install.md says, on a
// management cluster whose node is a real kubelet: the image `make image`
// builds, imported into the node as it would be pulled; the credentials'
// Secret created with the documented `kubectl create secret`; `kubectl
// apply -k` of an overlay over deploy/ that sets the repository (the
// pinned kubectl, whose kustomize builds the overlays); the
// plan-namespace RBAC. The reconciler's pod then runs under the
// securityContext deploy/ sets (its process's user, group and
// supplementary group read from the machine), its probes pass, it reads
// its credentials, and it answers a pull request on the real Gitea with a
// comment: it reached the API server with its ServiceAccount, the plans
// repository with its token and the forge's API.
func TestInstallOnRealNodes(t *testing.T) {
	image := makeImage(t)
	h := testenv.NewHost(t)
	lan := h.Network("mgmt")
	mgmt := testenv.StartKubeWith(t, testenv.KubeOptions{PKI: testenv.NewPKI(t, "mgmt"), Address: lan.HostIP, Nodes: true})
	nodes := h.StartNodes(mgmt, []string{image}, testenv.NodeSpec{Name: "mgmt-1", Network: lan})
	gt := testenv.StartGiteaOn(t, testenv.SeedDir(t, map[string]string{
		"plans/capi-quickstart.yaml":                        testenv.ExamplePlan(t, ""),
		"manifests/openstack-cloud-controller-manager.yaml": testenv.CCMManifest,
	}), lan.HostIP)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
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
	kubectl("create", "namespace", "capi-backup") // the example plan's backups
	for _, ns := range []string{"default", "capi-backup"} {
		kubectl("apply", "-n", ns, "-f", filepath.Join(deployDir, "plan-namespace", "rbac.yaml"))
	}
	kubectl("-n", "ferry-system", "rollout", "status", "deployment/ferry-reconciler", "--timeout=3m")

	var pods corev1.PodList
	if err := mgmt.Client.List(ctx, &pods, client.InNamespace("ferry-system"), client.MatchingLabels{"app.kubernetes.io/name": "ferry-reconciler"}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("reconciler pods: %d, %v", len(pods.Items), err)
	}
	pod := pods.Items[0]
	if !testenv.Serving(&pod) {
		t.Errorf("pod %s is not Ready and Running: %+v", pod.Name, pod.Status.Conditions)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.RestartCount > 0 {
			t.Errorf("container %s restarted %d times: %+v", cs.Name, cs.RestartCount, cs.LastTerminationState)
		}
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

	// It works: a pull request gets its comment.
	gt.AddWebhook(t, "http://"+pod.Status.PodIP+":9090/", webhookSecret)
	gt.PushBranch(t, testenv.GiteaMaintainer, "approve-cluster", "Approve cluster", map[string]string{
		"plans/capi-quickstart.yaml": testenv.ExamplePlan(t, "cluster"),
	})
	pr := gt.OpenPullRequest(t, testenv.GiteaMaintainer, "approve-cluster", "Approve cluster")
	for {
		comments := gt.Comments(t, pr)
		if len(comments) > 0 {
			body := comments[0].Body
			t.Logf("the installed reconciler answered pull request #%d:\n%s", pr, body)
			if comments[0].User.Login != testenv.GiteaBot || !strings.Contains(body, "ferry preview of #1") || strings.Contains(body, "may ferry list") {
				t.Errorf("want a preview by %s that read the plan's namespaces; got one by %s", testenv.GiteaBot, comments[0].User.Login)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the installed reconciler did not comment on pull request #%d", pr)
		}
		time.Sleep(time.Second)
	}

	// Without deploy/'s fsGroup the same pod cannot read its
	// credentials: the kubelet writes a Secret's files root-owned, and
	// 0400 (defaultMode) leaves its user out.
	kubectl("-n", "ferry-system", "patch", "deployment", "ferry-reconciler", "--type=json",
		"-p", `[{"op": "remove", "path": "/spec/template/spec/securityContext/fsGroup"}]`)
	for {
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
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("a reconciler without fsGroup did not fail to read its credentials; its log:\n%s", logs)
		}
		time.Sleep(time.Second)
	}
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
