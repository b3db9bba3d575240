package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RunPods makes k a cluster whose pods run, as a workload cluster's do: it
// starts the real kube-scheduler and kube-controller-manager of the pinned
// Kubernetes version against k, and for each name a kubemark hollow
// kubelet (`kubemark --morph=kubelet`), which registers a Node of that name
// and runs the pods bound to it on a fake container runtime: they become
// Running and Ready, and deleting them stops them. So Deployments and
// DaemonSets roll out, the disruption controller computes
// PodDisruptionBudgets and the API server enforces them on evictions.
// There are no containers: nothing listens where a pod's IP says.
//
// It returns once every Node is Ready. The programs stop when the test
// ends; their logs are in the returned LogDir, named when the test fails.
func (k *Kube) RunPods(t T, nodes ...string) *Managers {
	t.Helper()
	bin := kubeBinaries(t)
	for _, name := range []string{"kube-scheduler", "kube-controller-manager", "kubemark"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			t.Fatalf("testenv: %s not found in %s: run `make tools` (`make test` builds it when missing)", name, bin)
		}
	}
	logDir, err := os.MkdirTemp("", "ferry-nodes-")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	kubeconfig := filepath.Join(logDir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, k.Kubeconfig(t), 0o600); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	ms := &Managers{LogDir: logDir, procs: map[string]*managerProc{}}
	t.Cleanup(func() { ms.stop(t) })
	for name, args := range controlPlanePrograms(kubeconfig) {
		if _, err := ms.start(name, filepath.Join(bin, name), args); err != nil {
			t.Fatalf("testenv: %v", err)
		}
	}
	for _, node := range nodes {
		if _, err := ms.start("kubelet-"+node, filepath.Join(bin, "kubemark"), hollowKubelet(t, kubeconfig, logDir, node)); err != nil {
			t.Fatalf("testenv: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := ms.nodesReady(ctx, k.Client, nodes); err != nil {
		t.Fatalf("testenv: hollow nodes not Ready: %v (logs in %s)", err, logDir)
	}
	return ms
}

// controlPlanePrograms are the scheduler's and the controller manager's
// arguments. Neither serves anything the tests read, and the service
// account token controller is off: envtest's API server issues no
// service account keys to sign with.
func controlPlanePrograms(kubeconfig string) map[string][]string {
	common := []string{
		"--kubeconfig=" + kubeconfig, "--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0",
	}
	return map[string][]string{
		"kube-scheduler":          common,
		"kube-controller-manager": append(common, "--controllers=*,-serviceaccount-token"),
	}
}

// hollowKubelet is kubemark's arguments for one node, on a port of its own
// (the read-only port off) with its certificates under dir.
func hollowKubelet(t T, kubeconfig, dir, node string) []string {
	_, port, err := net.SplitHostPort(FreeAddr(t))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return []string{
		"--morph=kubelet", "--name=" + node, "--kubeconfig=" + kubeconfig,
		"--use-host-image-service=false", "--kubelet-port=" + port, "--kubelet-read-only-port=0",
		"--cert-dir=" + filepath.Join(dir, node),
	}
}

// nodesReady waits until a Node of each name reports Ready, failing early
// when one of the programs exits.
func (ms *Managers) nodesReady(ctx context.Context, c client.Client, names []string) error {
	last := "no Node yet"
	for {
		ready := 0
		for _, name := range names {
			var n corev1.Node
			if err := c.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
				last = fmt.Sprintf("node %s: %v", name, err)
				continue
			}
			if nodeReady(&n) {
				ready++
			} else {
				last = "node " + name + " is not Ready"
			}
		}
		if ready == len(names) {
			return nil
		}
		for name, p := range ms.procs {
			select {
			case <-p.exited:
				return fmt.Errorf("%s exited: %v; its last errors:\n%s", name, p.cmd.ProcessState, lastErrors(p.log, 10))
			default:
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %s)", ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
