package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/events"
)

// FerryImage runs `make image` in the repository and returns the tarball
// it writes (bin/reconciler-image.tar), for RealNodes to import as a
// registry's image would be pulled.
func FerryImage(t T) string {
	t.Helper()
	root := RepoRoot(t)
	if out, err := exec.Command("make", "-C", root, "image").CombinedOutput(); err != nil {
		t.Fatalf("testenv: make image: %v\n%s", err, out)
	}
	return filepath.Join(root, "bin", "reconciler-image.tar")
}

// RepoRoot is the repository's top directory, as `go list -m` finds the
// main module from the working directory (a test's package, or the
// repository where the demo runs): not from this file's compiled path,
// which a -trimpath build (make build's, the demo's) turns into the
// module's import path.
func RepoRoot(t T) string {
	t.Helper()
	dirs, err := moduleDirs()
	if err != nil {
		t.Fatalf("testenv: find the repository: %v", err)
	}
	return dirs[mainModule]
}

// Installed is ferry installed in a management cluster with real nodes
// the way docs/install.md says, on a Gitea's plans repository.
type Installed struct {
	t     T
	k     *Kube
	nodes *RealNodes
	gt    *Gitea
	dir   string
	// reconcilers and executors are how many pods of each the layout
	// runs: the base's one reconciler with its executors in process, or
	// overlays/cluster's two and three.
	reconcilers, executors int
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
	in := &Installed{t: t, k: k, nodes: nodes, gt: gt, dir: t.TempDir(), reconcilers: 1}
	in.Kubeconfig = filepath.Join(in.dir, "kubeconfig")
	in.WebhookSecret = randomHex(16)
	in.write("kubeconfig", string(k.Kubeconfig(t)))
	in.write("git-token", gt.Token(GiteaBot))
	in.write("forge-token", gt.Token(GiteaBot))
	in.write("webhook-secret", in.WebhookSecret)
	in.Kubectl(ctx, "create", "namespace", "ferry-system")
	in.Kubectl(ctx, "-n", "ferry-system", "create", "secret", "generic", "ferry-credentials",
		"--from-file=git-token=./git-token", "--from-file=forge-token=./forge-token",
		"--from-file=webhook-secret=./webhook-secret")
	deploy, err := filepath.Abs(filepath.Join(RepoRoot(t), "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(in.dir, "overlay")
	base, err := filepath.Rel(overlay, deploy) // kustomize takes no absolute path
	if err != nil {
		t.Fatal(err)
	}
	in.write("overlay/kustomization.yaml", in.kustomization(base, ""))
	in.Kubectl(ctx, "apply", "-k", overlay)
	for _, ns := range namespaces {
		in.Kubectl(ctx, "apply", "-n", ns, "-f", filepath.Join(deploy, "plan-namespace", "rbac.yaml"))
	}
	in.Kubectl(ctx, "-n", "ferry-system", "rollout", "status", "deployment/ferry-reconciler", "--timeout=3m")
	return in
}

// kustomization is the overlay the test applies over base (a path
// relative to it): ferry-config with the plans repository and the forge,
// and the literal lines of more.
func (in *Installed) kustomization(base, more string) string {
	return fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
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
%s`, base, in.gt.RepoURL(), in.gt.URL, in.gt.Owner, in.gt.Repo, more)
}

// Cluster moves the installation to the clustered layout on np as
// docs/install.md says: each role's Secret (its NATS password and the
// servers' CA) created with `kubectl create secret generic`, then
// `kubectl apply -k` of deploy/overlays/cluster with the same
// ferry-config and nats-url set to np's; it waits for both rollouts.
func (in *Installed) Cluster(ctx context.Context, np *NATSPods) {
	in.t.Helper()
	in.write("nats-ca.crt", string(np.CA))
	for _, role := range events.Roles {
		in.write(string(role)+".password", np.Passwords[role])
		in.Kubectl(ctx, "-n", "ferry-system", "create", "secret", "generic", "ferry-nats-"+string(role),
			"--from-file=password=./"+string(role)+".password", "--from-file=ca.crt=./nats-ca.crt")
	}
	overlay := filepath.Join(in.dir, "overlay-cluster")
	base, err := filepath.Rel(overlay, filepath.Join(RepoRoot(in.t), "deploy", "overlays", "cluster"))
	if err != nil {
		in.t.Fatal(err)
	}
	in.write("overlay-cluster/kustomization.yaml", in.kustomization(base, "      - nats-url="+np.URL+"\n"))
	in.Kubectl(ctx, "apply", "-k", overlay)
	in.reconcilers, in.executors = 2, 3
	for _, d := range []string{"ferry-reconciler", "ferry-executor"} {
		in.Kubectl(ctx, "-n", "ferry-system", "rollout", "status", "deployment/"+d, "--timeout=3m")
	}
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

// The apps of ferry's pods (label app.kubernetes.io/name), whose
// container is named after the role.
const (
	ReconcilerApp = "ferry-reconciler"
	ExecutorApp   = "ferry-executor"
)

// Pods are app's pods (ReconcilerApp, ExecutorApp), Ready or not.
func (in *Installed) Pods(ctx context.Context, app string) []corev1.Pod {
	in.t.Helper()
	var pods corev1.PodList
	if err := in.k.Client.List(ctx, &pods, client.InNamespace("ferry-system"), client.MatchingLabels{"app.kubernetes.io/name": app}); err != nil {
		in.t.Fatalf("testenv: the pods of %s: %v", app, err)
	}
	return pods.Items
}

// Serving waits until the layout's reconciler pods, and no other, are
// Ready and Running, and returns them.
func (in *Installed) Serving(ctx context.Context) []corev1.Pod {
	in.t.Helper()
	for {
		pods := in.Pods(ctx, ReconcilerApp)
		serving := 0
		for i := range pods {
			if Serving(&pods[i]) && pods[i].DeletionTimestamp == nil {
				serving++
			}
		}
		if len(pods) == in.reconcilers && serving == in.reconcilers {
			return pods
		}
		if ctx.Err() != nil {
			in.t.Fatalf("testenv: %d of %d reconciler pods serving, %d pods\n%s", serving, in.reconcilers, len(pods), in.Logs(ctx))
		}
		time.Sleep(time.Second)
	}
}

// Client is the management cluster's client.
func (in *Installed) Client() client.Client { return in.k.Client }

// Log is what container wrote in pod of ferry-system.
func (in *Installed) Log(pod, container string) string {
	return in.nodes.ContainerLog("ferry-system", pod, container)
}

// Logs is the end of every one of ferry's pods' logs, for a failure's
// message.
func (in *Installed) Logs(ctx context.Context) string {
	var b strings.Builder
	for app, container := range map[string]string{ReconcilerApp: "reconciler", ExecutorApp: "executor"} {
		for _, p := range in.Pods(ctx, app) {
			log := strings.Split(strings.TrimRight(in.nodes.ContainerLog("ferry-system", p.Name, container), "\n"), "\n")
			fmt.Fprintf(&b, "--- pod %s (%s), the end of its log:\n%s\n", p.Name, p.Status.Phase, strings.Join(log[max(0, len(log)-30):], "\n"))
		}
	}
	return b.String()
}
