package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FerryImage runs `make image` in the repository and returns the tarball
// it writes (bin/reconciler-image.tar), for RealNodes to import as a
// registry's image would be pulled.
func FerryImage(t T) string {
	t.Helper()
	root := repoRoot(t)
	if out, err := exec.Command("make", "-C", root, "image").CombinedOutput(); err != nil {
		t.Fatalf("testenv: make image: %v\n%s", err, out)
	}
	return filepath.Join(root, "bin", "reconciler-image.tar")
}

// repoRoot is the repository's top directory.
func repoRoot(t T) string {
	t.Helper()
	_, here, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatalf("testenv: no caller information to find the repository")
	}
	return filepath.Join(filepath.Dir(here), "..", "..", "..")
}

// Installed is ferry installed in a management cluster with real nodes
// the way docs/install.md says, on a Gitea's plans repository.
type Installed struct {
	t     T
	k     *Kube
	nodes *RealNodes
	dir   string
	// Kubeconfig is the file Kubectl uses: the management cluster's admin.
	Kubeconfig string
	// WebhookSecret signs Gitea's webhooks to the reconciler.
	WebhookSecret string
}

// Install runs docs/install.md's commands against k, whose nodes run
// `make image`'s image (FerryImage): the namespace, the credentials'
// Secret from files with `kubectl create secret generic`, `kubectl apply
// -k` of an overlay over deploy/ that sets the plans repository and the
// forge to gt's (ferry-config), the plan-namespace RBAC in each of
// namespaces; then it waits for the rollout. The pinned kubectl
// (Kubectl) does it all: its kustomize builds deploy/'s overlays.
func Install(t T, ctx context.Context, k *Kube, nodes *RealNodes, gt *Gitea, namespaces ...string) *Installed {
	t.Helper()
	in := &Installed{t: t, k: k, nodes: nodes, dir: t.TempDir()}
	in.Kubeconfig = filepath.Join(in.dir, "kubeconfig")
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	in.WebhookSecret = hex.EncodeToString(b)
	in.write("kubeconfig", string(k.Kubeconfig(t)))
	in.write("git-token", gt.Token(GiteaBot))
	in.write("forge-token", gt.Token(GiteaBot))
	in.write("webhook-secret", in.WebhookSecret)
	in.Kubectl(ctx, "create", "namespace", "ferry-system")
	in.Kubectl(ctx, "-n", "ferry-system", "create", "secret", "generic", "ferry-credentials",
		"--from-file=git-token=./git-token", "--from-file=forge-token=./forge-token",
		"--from-file=webhook-secret=./webhook-secret")
	deploy, err := filepath.Abs(filepath.Join(repoRoot(t), "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(in.dir, "overlay")
	base, err := filepath.Rel(overlay, deploy) // kustomize takes no absolute path
	if err != nil {
		t.Fatal(err)
	}
	in.write("overlay/kustomization.yaml", fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
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
	in.Kubectl(ctx, "apply", "-k", overlay)
	for _, ns := range namespaces {
		in.Kubectl(ctx, "apply", "-n", ns, "-f", filepath.Join(deploy, "plan-namespace", "rbac.yaml"))
	}
	in.Kubectl(ctx, "-n", "ferry-system", "rollout", "status", "deployment/ferry-reconciler", "--timeout=3m")
	return in
}

func (in *Installed) write(name, data string) {
	in.t.Helper()
	path := filepath.Join(in.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		in.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		in.t.Fatal(err)
	}
}

// Kubectl runs the pinned kubectl on the management cluster in the
// install's directory and returns its output; it fails the test when
// kubectl fails.
func (in *Installed) Kubectl(ctx context.Context, args ...string) string {
	in.t.Helper()
	cmd := exec.CommandContext(ctx, Kubectl(in.t), append([]string{"--kubeconfig", in.Kubeconfig}, args...)...)
	cmd.Dir = in.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		in.t.Fatalf("testenv: kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Pods are the reconciler's pods, Ready or not.
func (in *Installed) Pods(ctx context.Context) []corev1.Pod {
	in.t.Helper()
	var pods corev1.PodList
	if err := in.k.Client.List(ctx, &pods, client.InNamespace("ferry-system"), client.MatchingLabels{"app.kubernetes.io/name": "ferry-reconciler"}); err != nil {
		in.t.Fatalf("testenv: the reconciler's pods: %v", err)
	}
	return pods.Items
}

// Serving waits until exactly one reconciler pod is Ready and Running and
// no other is left, and returns it.
func (in *Installed) Serving(ctx context.Context) corev1.Pod {
	in.t.Helper()
	for {
		pods := in.Pods(ctx)
		if len(pods) == 1 && Serving(&pods[0]) && pods[0].DeletionTimestamp == nil {
			return pods[0]
		}
		if ctx.Err() != nil {
			in.t.Fatalf("testenv: no single reconciler pod serving: %d pods\n%s", len(pods), in.Logs(ctx))
		}
		time.Sleep(time.Second)
	}
}

// Logs is the end of every reconciler pod's log, for a failure's message.
func (in *Installed) Logs(ctx context.Context) string {
	var b strings.Builder
	for _, p := range in.Pods(ctx) {
		log := strings.Split(strings.TrimRight(in.nodes.ContainerLog("ferry-system", p.Name, "reconciler"), "\n"), "\n")
		fmt.Fprintf(&b, "--- pod %s (%s), the end of its log:\n%s\n", p.Name, p.Status.Phase, strings.Join(log[max(0, len(log)-30):], "\n"))
	}
	return b.String()
}
