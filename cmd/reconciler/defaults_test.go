package main

import "testing"

// TestMetricsAddrDefault: --metrics-addr listens on loopback unless the
// process runs in a pod, where Prometheus and the kubelet reach it on
// every address.
func TestMetricsAddrDefault(t *testing.T) {
	f := newRunCommand().Flags().Lookup("metrics-addr")
	if f == nil || f.DefValue != "127.0.0.1:8080" {
		t.Fatalf("--metrics-addr's default is %v; want 127.0.0.1:8080", f)
	}
	for env, want := range map[string]string{"": "127.0.0.1:8080", "10.96.0.1": ":8080"} {
		got := defaultMetricsAddr(func(name string) string {
			if name == "KUBERNETES_SERVICE_HOST" {
				return env
			}
			return ""
		})
		if got != want {
			t.Errorf("KUBERNETES_SERVICE_HOST=%q: --metrics-addr defaults to %q; want %q", env, got, want)
		}
	}
}
