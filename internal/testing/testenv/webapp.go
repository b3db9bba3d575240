package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// What a replace migration (seed 003) must keep serving while it drains
// the old nodes: a web application in front of which a probe stands for
// the public URL, and the VPN overlay's client that network-bridge runs
// on every node.

// WebLabels select the web application's pods.
var WebLabels = map[string]string{"app": "web"}

// VPNClientManifest is the VPN overlay between the old nodes' network and
// the new ones' (seed 003, worker/vpn-overlay), for
// spec.manifests.vpnOverlay: a DaemonSet in kube-system of the test
// application's overlay role (testapp overlay: a kernel VXLAN tunnel from
// each node to the nodes of the other networks, routes to their pods
// through it), with the ServiceAccount and the read of Nodes it needs.
// Seed 003 runs an OpenVPN client there; the kernel's VXLAN is what runs
// on these machines (no WireGuard or GRE module, no registry for an
// OpenVPN image), and it carries pod traffic between the clouds as that
// VPN does, unencrypted. Host.Route joins the networks' node addresses,
// not their pods'. A pod is ready only while the overlay pods of every
// node of the other network answer it through the tunnel: the
// DaemonSet's availability is the overlay's traffic, not its processes.
const VPNClientManifest = `apiVersion: v1
kind: ServiceAccount
metadata: {name: vpn-client, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: vpn-client}
rules:
- {apiGroups: [""], resources: [nodes], verbs: [get, list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: vpn-client}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: vpn-client}
subjects:
- {kind: ServiceAccount, name: vpn-client, namespace: kube-system}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: vpn-client, namespace: kube-system}
spec:
  selector:
    matchLabels: {app: vpn-client}
  template:
    metadata:
      labels: {app: vpn-client}
    spec:
      serviceAccountName: vpn-client
      hostNetwork: true
      terminationGracePeriodSeconds: 5
      tolerations: [{operator: Exists}]
      containers:
      - name: overlay
        image: ` + TestAppImage + `
        imagePullPolicy: Never
        args: [overlay]
        env:
        - name: NODE_NAME
          valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
        securityContext: {privileged: true}
        ports: [{name: peer, containerPort: 9420}]
        readinessProbe:
          httpGet: {path: /ready, port: 9420}
          periodSeconds: 2
`

// VPNTunnel is the overlay's tunnel device on each node (testapp overlay),
// VPNPort the UDP port its packets travel to between the clouds.
const (
	VPNTunnel = "ferry-vx"
	VPNPort   = 4789
)

// RunWeb runs the web application in namespace default: a Deployment of
// three replicas of the test server (testapp serve) under a
// PodDisruptionBudget of one disruption, behind Service web. It waits, up
// to two minutes, until the three serve.
func (k *Kube) RunWeb(ctx context.Context) error {
	objs := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: WebLabels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: WebLabels},
				Spec: TestAppPod([]string{"serve"}, 8080)}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: corev1.ServiceSpec{
			Selector: WebLabels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: WebLabels}}},
	}
	for _, o := range objs {
		if err := k.Client.Create(ctx, o); err != nil {
			return fmt.Errorf("create the web application: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		if pods, err := k.Pods(ctx, "default", WebLabels, Serving); err == nil && len(pods) == 3 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("three web replicas never served (see the workload cluster's managers' logs): %w", ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// TestAppPod is a pod of the test application (TestAppImage) with args,
// ready when it answers /ready on port.
func TestAppPod(args []string, port int32) corev1.PodSpec {
	return corev1.PodSpec{
		Containers: []corev1.Container{{
			Name: "app", Image: TestAppImage, ImagePullPolicy: corev1.PullNever, Args: args,
			ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(port)}}},
		}},
	}
}

// Caller is the test application's client in a pod: it calls a URL
// every 100 ms, a new connection each time, and counts.
type Caller struct {
	k    *Kube
	Pod  string
	addr string
}

// CallerCounts is what a Caller counted: every call once, as ok or
// failed, the longest run of failures, and the answers by text
// ("<server pod> <caller's address as the server saw it>").
type CallerCounts struct {
	Calls, OK, Failed int
	LongestOutage     time.Duration
	Answers           map[string]int
	LastError         string
}

// RunCaller runs a Caller of url in pod name on node (tolerating its
// taints) and waits until it runs.
func (k *Kube) RunCaller(ctx context.Context, name, node, url string) (*Caller, error) {
	spec := TestAppPod([]string{"client", url}, 8081)
	spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: spec}
	if err := k.Client.Create(ctx, pod); err != nil {
		return nil, fmt.Errorf("create caller %s: %w", name, err)
	}
	for {
		if err := k.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err == nil && Serving(pod) {
			return &Caller{k: k, Pod: name, addr: pod.Status.PodIP}, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("caller %s never ran on %s: %w", name, node, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// IP is the caller's pod address.
func (c *Caller) IP() string { return c.addr }

// Counts reads what the caller counted so far.
func (c *Caller) Counts(ctx context.Context) (CallerCounts, error) {
	var counts CallerCounts
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(c.addr, "8081")+"/counts", nil)
	if err != nil {
		return counts, err
	}
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
	if err != nil {
		return counts, fmt.Errorf("caller %s: %w", c.Pod, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return counts, fmt.Errorf("caller %s: %s", c.Pod, resp.Status)
	}
	return counts, json.NewDecoder(resp.Body).Decode(&counts)
}

// Probe stands for the web application's public URL: it answers 200
// while a web pod serves and 503 when none does, as a load balancer in
// front of the pods would, and counts its answers. Close it when done.
type Probe struct {
	*httptest.Server
	mu      sync.Mutex
	ok, all int
}

// NewProbe serves the probe of k's web application.
func (k *Kube) NewProbe() *Probe {
	p := &Probe{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := http.StatusServiceUnavailable
		if pods, err := k.Pods(r.Context(), "default", WebLabels, Serving); err == nil && len(pods) > 0 {
			code = http.StatusOK
		}
		p.mu.Lock()
		p.all++
		if code == http.StatusOK {
			p.ok++
		}
		p.mu.Unlock()
		w.WriteHeader(code)
	}))
	return p
}

// Answered is how many answers were 200, of how many.
func (p *Probe) Answered() (ok, all int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ok, p.all
}
