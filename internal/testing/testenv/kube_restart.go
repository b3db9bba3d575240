package testenv

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// RestartAPIServer stops kube-apiserver and starts it again on the same
// address and port, with the same flags and certificates, so that k.Config,
// k.Client and every client made from them keep working once they reconnect.
// etcd keeps running, so every object survives. It returns when the API
// server answers /readyz; it fails the test if the server does not stop, or
// is not ready within the start timeout given to envtest (2 minutes).
//
// While it runs, requests fail with "connection refused"; that is the fault
// it injects.
func (k *Kube) RestartAPIServer(t T) {
	t.Helper()
	api := k.env.ControlPlane.GetAPIServer()
	start := time.Now()
	// Stop leaves CertDir (StartKubeWith chose it), the port, the admin's
	// client CA and the flags in api, and Start reuses them all.
	if err := api.Stop(); err != nil {
		t.Fatalf("testenv: stop API server at %s: %v", k.Config.Host, err)
	}
	if err := api.Start(); err != nil {
		t.Fatalf("testenv: start API server at %s again: %v", k.Config.Host, err)
	}
	if err := waitReadyz(k.Config, k.env.ControlPlaneStartTimeout); err != nil {
		t.Fatalf("testenv: restart API server at %s: %v", k.Config.Host, err)
	}
	t.Logf("testenv: API server at %s restarted in %s", k.Config.Host, time.Since(start).Round(time.Millisecond))
}

// waitReadyz polls the API server's /readyz until it answers "ok". Start
// only waits for /healthz, which reports a live process; /readyz also
// waits for the post-start hooks (informers synced, CRDs served again).
func waitReadyz(cfg *rest.Config, timeout time.Duration) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client for /readyz: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	const poll = 100 * time.Millisecond
	for {
		_, err := dc.RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s: %w", timeout, err)
		case <-time.After(poll):
		}
	}
}
