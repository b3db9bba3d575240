package testenv

import (
	"context"
	"fmt"
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

// VPNClientManifest is the VPN overlay's client DaemonSet (seed 003,
// worker/vpn-overlay), for spec.manifests.vpnOverlay.
const VPNClientManifest = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: vpn-client
  namespace: kube-system
spec:
  selector:
    matchLabels: {app: vpn-client}
  template:
    metadata:
      labels: {app: vpn-client}
    spec:
      containers:
        - name: openvpn
          image: registry.example.com/openvpn-client:2.6
`

// RunWeb runs the web application in namespace default: a Deployment of
// three replicas under a PodDisruptionBudget of one disruption. It waits,
// up to two minutes, until the three serve.
func (k *Kube) RunWeb(ctx context.Context) error {
	objs := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: WebLabels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: WebLabels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example.com/shop:1.0"}}}}}},
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
