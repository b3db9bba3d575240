package testenv_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestRealNodes starts two real nodes (containerd, runc, a kubelet and
// kube-proxy each, in network namespaces of their own) on one network,
// one with a label and a taint of its spec,
// with the real scheduler and controller manager: a Deployment of the test
// server on one node, behind a Service, answers a client pod on the other
// through the Service's address (kube-proxy's rules), the answers name the
// client's own pod address (no masquerading between pods), and the host
// reaches both pods. The machine is recorded before the nodes start and
// compared after they stopped: nothing they changed may be left.
func TestRealNodes(t *testing.T) {
	release := testenv.LockHost(t) // no other test's nodes meanwhile
	defer release()
	before := testenv.RecordHost()
	t.Run("cluster", func(t *testing.T) {
		h := testenv.NewHost(t)
		lan := h.Network("lan")
		k := testenv.StartKubeWith(t, testenv.KubeOptions{PKI: testenv.NewPKI(t, "real"), Address: lan.HostIP, Nodes: true})
		dedicated := corev1.Taint{Key: "ferry.test/dedicated", Value: "client", Effect: corev1.TaintEffectNoSchedule}
		rn := h.StartNodes(k, nil,
			testenv.NodeSpec{Name: "node-a", Network: lan, Labels: map[string]string{"ferry.test/role": "client"}, Taints: []corev1.Taint{dedicated}},
			testenv.NodeSpec{Name: "node-b", Network: lan})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()

		labels := map[string]string{"app": "web"}
		server := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](2),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       testApp("node-b", []string{"serve"}, 8080),
				},
			},
		}
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
			Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}
		for _, o := range []client.Object{server, svc} {
			if err := k.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		var nodeA corev1.Node
		testenv.MustGet(t, k.Client, "", "node-a", &nodeA)
		// The spec's taint, once (the node lifecycle controller's
		// not-ready taint may still be there from the registration).
		dedicatedTaints := 0
		for _, taint := range nodeA.Spec.Taints {
			if taint.MatchTaint(&dedicated) {
				dedicatedTaints++
			}
		}
		if nodeA.Labels["ferry.test/role"] != "client" || dedicatedTaints != 1 {
			t.Errorf("node-a: labels %v, taints %v; want its spec's label and its taint once", nodeA.Labels, nodeA.Spec.Taints)
		}
		caller, err := k.RunCaller(ctx, "client", "node-a", "http://"+svc.Spec.ClusterIP+"/")
		if err != nil {
			t.Fatal(err)
		}
		counts := waitCounts(t, ctx, caller, "answers from both servers through the Service", func(c testenv.CallerCounts) bool { return len(c.Answers) == 2 && c.OK >= 10 })
		for answer := range counts.Answers {
			server, from, _ := strings.Cut(answer, " ")
			if !strings.HasPrefix(server, "web-") || from != caller.IP() {
				t.Errorf("answer %q: want a web pod answering the client's own address %s", answer, caller.IP())
			}
		}
		var pods corev1.PodList
		if err := k.Client.List(ctx, &pods, client.MatchingLabels(labels)); err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "node-b" || !testenv.Serving(&p) {
				t.Errorf("pod %s: on %q, serving %t", p.Name, p.Spec.NodeName, testenv.Serving(&p))
			}
			resp, err := http.Get("http://" + p.Status.PodIP + ":8080/")
			if err != nil {
				t.Errorf("the host cannot reach pod %s at %s: %v", p.Name, p.Status.PodIP, err)
				continue
			}
			resp.Body.Close()
		}
		t.Logf("client: %d calls, %d ok, %d failed, answers %v", counts.Calls, counts.OK, counts.Failed, counts.Answers)

		twoClouds(t, ctx, h, lan, k, rn)
	})
	if diff := before.Diff(testenv.RecordHost()); diff != "" {
		t.Errorf("the machine after the real nodes differs from before:\n%s", diff)
	}
}

// twoClouds joins a second network, "cloud", to lan through the host, as
// the replace scenario's new cloud, and starts node-c on it. A client on
// node-a calls a Service whose server runs on node-c: every call fails
// (lan's nodes have no route to cloud's pods), until the overlay
// (testenv.VPNClientManifest) is applied; then the calls succeed, answered
// with the client's own pod address (nothing rewrote it on the way), and
// node-a's tunnel counted the packets. With the overlay deleted, its
// tunnel is gone and the calls fail again.
func twoClouds(t *testing.T, ctx context.Context, h *testenv.Host, lan *testenv.Network, k *testenv.Kube, rn *testenv.RealNodes) {
	cloud := h.Network("cloud")
	h.Route(lan, cloud)
	rn.AddNode(testenv.NodeSpec{Name: "node-c", Network: cloud})
	labels := map[string]string{"app": "far"}
	far := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "far", Labels: labels}, Spec: testApp("node-c", []string{"serve"}, 8080)}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "far"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	for _, o := range []client.Object{far, svc} {
		if err := k.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rn.PodIP(ctx, "default", "far"); err != nil {
		t.Fatal(err)
	}
	caller, err := k.RunCaller(ctx, "far-client", "node-a", "http://"+svc.Spec.ClusterIP+"/")
	if err != nil {
		t.Fatal(err)
	}
	callerIP := caller.IP()
	counts := func(what string, done func(c testenv.CallerCounts) bool) testenv.CallerCounts {
		t.Helper()
		return waitCounts(t, ctx, caller, what, done)
	}
	before := counts("calls across the clouds before the overlay", func(c testenv.CallerCounts) bool { return c.Calls >= 8 })
	if before.OK != 0 {
		t.Fatalf("before the overlay, %d of %d calls from lan reached cloud's pod: the networks route pods' addresses (%v)", before.OK, before.Calls, before.Answers)
	}
	t.Logf("before the overlay: %d calls, none answered (%s)", before.Calls, before.LastError)

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, k.Kubeconfig(t), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl := func(stdin string, args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, testenv.Kubectl(t), append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	kubectl(testenv.VPNClientManifest, "apply", "-f", "-")
	kubectl("", "-n", "kube-system", "rollout", "status", "daemonset/vpn-client", "--timeout=2m")
	with := counts("calls across the clouds through the overlay", func(c testenv.CallerCounts) bool { return c.OK >= 10 })
	for answer := range with.Answers {
		if server, from, _ := strings.Cut(answer, " "); server != "far" || from != callerIP {
			t.Errorf("answer %q through the overlay: want far answering the client's own address %s", answer, callerIP)
		}
	}
	tunnel := func() (sent int, err error) {
		_, sent, err = rn.LinkStats("node-a", "ferry-vx")
		return sent, err
	}
	if sent, err := tunnel(); err != nil || sent < with.OK {
		t.Errorf("node-a's tunnel sent %d packets (%v) for %d answered calls: the calls did not go through the overlay", sent, err, with.OK)
	}
	t.Logf("through the overlay: %d calls answered, %d failed before", with.OK, with.Failed)

	// Calls go on succeeding while the pods terminate (for longer on a
	// busy machine), so the count that must not grow is the one taken
	// once the tunnel is gone.
	kubectl("", "-n", "kube-system", "delete", "daemonset", "vpn-client", "--cascade=foreground", "--wait")
	if _, err := tunnel(); err == nil {
		t.Errorf("node-a's tunnel is still there after the overlay's pods went")
	}
	gone := counts("calls across the clouds when the tunnel went", func(testenv.CallerCounts) bool { return true })
	after := counts("calls across the clouds after the overlay went", func(c testenv.CallerCounts) bool { return c.Failed >= gone.Failed+5 })
	// A call or two may have been on their way when it went.
	if late := after.OK - gone.OK; late > 2 {
		t.Errorf("%d calls answered after node-a's tunnel went", late)
	}
	t.Logf("after the overlay: %d calls answered while its pods terminated, %d after its tunnel went, %d failed", gone.OK-with.OK, after.OK-gone.OK, after.Failed-gone.Failed)
}

// waitCounts waits until what the caller counted is done, and returns it.
func waitCounts(t *testing.T, ctx context.Context, c *testenv.Caller, what string, done func(testenv.CallerCounts) bool) testenv.CallerCounts {
	t.Helper()
	for {
		counts, err := c.Counts(ctx)
		if err == nil && done(counts) {
			return counts
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: %+v, %v", what, counts, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// testApp is a pod of the test application on node, with args, ready
// when it answers /ready on port.
func testApp(node string, args []string, port int32) corev1.PodSpec {
	spec := testenv.TestAppPod(args, port)
	spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	spec.TerminationGracePeriodSeconds = ptr.To[int64](2)
	return spec
}
