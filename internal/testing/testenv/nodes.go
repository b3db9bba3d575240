package testenv

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	specs := make([]Node, len(nodes))
	for i, name := range nodes {
		specs[i] = Node{Name: name}
	}
	return k.RunNodes(t, specs...)
}

// Node is a hollow kubelet's node: its name, the provider ID it carries
// (a hollow kubelet's own is kubemark://<name>; see registerNode) and its
// labels and taints, as a kubelet's --node-labels and
// --register-with-taints give them.
type Node struct {
	Name, ProviderID string
	Labels           map[string]string
	// Taints are "<key>=<value>:<effect>" or "<key>:<effect>".
	Taints []string
}

// RunNodes is RunPods with nodes that carry provider IDs, labels and
// taints; more join later through Managers.AddNode.
func (k *Kube) RunNodes(t T, nodes ...Node) *Managers {
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
	ms := &Managers{LogDir: logDir, procs: map[string]*managerProc{}, kube: k, kubemark: filepath.Join(bin, "kubemark"), kubeconfig: kubeconfig}
	t.Cleanup(func() { ms.stop(t) })
	// The service account token controller is off: envtest's API server
	// issues no service account keys to sign with.
	for name, args := range controlPlanePrograms(kubeconfig, "--controllers=*,-serviceaccount-token") {
		if _, err := ms.start(name, filepath.Join(bin, name), args); err != nil {
			t.Fatalf("testenv: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, n := range nodes {
		if err := ms.AddNode(ctx, t, n); err != nil {
			t.Fatalf("testenv: %v (logs in %s)", err, logDir)
		}
	}
	return ms
}

// AddNode starts a hollow kubelet for n on the cluster of RunNodes and
// returns once its Node is Ready and carries n's provider ID: a machine
// that joined the cluster, as far as the API server can tell. Called
// again for the same node, it only waits (two minutes at most).
func (ms *Managers) AddNode(ctx context.Context, t T, n Node) error {
	if ms.kube == nil {
		return fmt.Errorf("AddNode: these managers were not started by RunNodes")
	}
	ms.mu.Lock()
	_, running := ms.procs["kubelet-"+n.Name]
	ms.mu.Unlock()
	if !running { // a second call waits for the first one's node
		if err := ms.registerNode(ctx, n); err != nil {
			return err
		}
		if _, err := ms.start("kubelet-"+n.Name, ms.kubemark, hollowKubelet(t, ms.kubeconfig, ms.LogDir, n)); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := ms.nodesReady(ctx, ms.kube.Client, []string{n.Name}); err != nil {
		return fmt.Errorf("hollow node %s not Ready: %w", n.Name, err)
	}
	return nil
}

// registerNode creates n's Node with its provider ID before its hollow
// kubelet starts, when it has one: a hollow kubelet registers
// kubemark://<name>, and a provider ID, once set, cannot change. The
// kubelet takes the Node it finds, as a real one does after a restart,
// and reports its status.
func (ms *Managers) registerNode(ctx context.Context, n Node) error {
	if n.ProviderID == "" {
		return nil
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{"kubernetes.io/hostname": n.Name}}}
	maps.Copy(node.Labels, n.Labels)
	node.Spec.ProviderID = n.ProviderID
	for _, taint := range n.Taints {
		kv, effect, _ := strings.Cut(taint, ":")
		key, value, _ := strings.Cut(kv, "=")
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)})
	}
	if err := ms.kube.Client.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("register Node %s with provider ID %s: %w", n.Name, n.ProviderID, err)
	}
	return nil
}

// controlPlanePrograms are the scheduler's and the controller manager's
// arguments, the controller manager's own last. Neither serves anything
// the tests read.
func controlPlanePrograms(kubeconfig string, controllerManager ...string) map[string][]string {
	common := []string{
		"--kubeconfig=" + kubeconfig, "--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0",
	}
	return map[string][]string{
		"kube-scheduler":          common,
		"kube-controller-manager": append(slices.Clip(common), controllerManager...),
	}
}

// hollowKubelet is kubemark's arguments for one node, on a port of its own
// (the read-only port off) with its certificates under dir.
func hollowKubelet(t T, kubeconfig, dir string, n Node) []string {
	_, port, err := net.SplitHostPort(FreeAddr(t))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	args := []string{
		"--morph=kubelet", "--name=" + n.Name, "--kubeconfig=" + kubeconfig,
		"--use-host-image-service=false", "--kubelet-port=" + port, "--kubelet-read-only-port=0",
		"--cert-dir=" + filepath.Join(dir, n.Name),
	}
	if len(n.Labels) > 0 {
		var labels []string
		for k, v := range n.Labels {
			labels = append(labels, k+"="+v)
		}
		sort.Strings(labels)
		args = append(args, "--node-labels="+strings.Join(labels, ","))
	}
	if len(n.Taints) > 0 {
		args = append(args, "--register-with-taints="+strings.Join(n.Taints, ","))
	}
	return args
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
		if err := ms.exited(); err != nil {
			return err
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

// StopNode stops node name's hollow kubelet, as a machine that was
// deleted stops its kubelet; the Node object stays until someone deletes
// it, as with a real machine.
// Kind says what Managers' nodes are: NodePool.
func (ms *Managers) Kind() string { return "hollow kubelet" }

func (ms *Managers) StopNode(name string) {
	ms.mu.Lock()
	p := ms.procs["kubelet-"+name]
	delete(ms.procs, "kubelet-"+name)
	ms.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}
