package kube

import (
	"crypto/sha256"
	"fmt"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/redact"
)

// Client-side rate limits of ferry's clients (per resource type: each
// type has its own REST client). client-go's defaults (5 requests per
// second, bursts of 10) throttle a reconciler that plans a fleet, and so
// did 50: the executors of a kind write the same few types at once
// (100-plan benchmark, 16 executors: 52 s at 50, 34 s at 200). The API server's priority and
// fairness still protects itself.
const (
	QPS   = 200
	Burst = 400
)

// Tune sets ferry's client-side rate limits on cfg and returns it.
func Tune(cfg *rest.Config) *rest.Config {
	cfg.QPS, cfg.Burst = QPS, Burst
	return cfg
}

// maxCachedClients bounds the workload client cache; past it the cache
// starts over (a fleet larger than this reconnects now and then).
const maxCachedClients = 4096

// clientCache keeps workload clients of one type by kubeconfig, so that
// each cycle and each step reuse the connection and the API discovery of the
// last one instead of building them again. A kubeconfig whose credentials
// change is a new key.
type clientCache[C any] struct {
	mu sync.Mutex
	m  map[[32]byte]C
}

var (
	controllerClients = &clientCache[client.Client]{}
	clientsets        = &clientCache[kubernetes.Interface]{}
)

// get returns the cached client for kubeconfig, or builds and keeps it.
func (c *clientCache[C]) get(kubeconfig []byte, build func(*rest.Config) (C, error)) (C, error) {
	key := sha256.Sum256(kubeconfig)
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.m[key]; ok {
		return cl, nil
	}
	var zero C
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return zero, fmt.Errorf("parse kubeconfig: %w", err)
	}
	// An error of the workload cluster's API server, or of a proxy in
	// front of it, may quote what it was sent.
	redact.Register(cfg.BearerToken, cfg.Password, string(cfg.KeyData))
	cl, err := build(Tune(cfg))
	if err != nil {
		return zero, err
	}
	if c.m == nil || len(c.m) >= maxCachedClients {
		c.m = map[[32]byte]C{}
	}
	c.m[key] = cl
	return cl, nil
}

// WorkloadClient returns a controller-runtime client with ferry's scheme
// for a kubeconfig, cached.
func WorkloadClient(kubeconfig []byte) (client.Client, error) {
	return controllerClients.get(kubeconfig, func(cfg *rest.Config) (client.Client, error) {
		httpClient, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return nil, err
		}
		mapper, err := workloadMapper(cfg, httpClient)
		if err != nil {
			return nil, err
		}
		return client.New(cfg, client.Options{Scheme: Scheme(), HTTPClient: httpClient, Mapper: mapper})
	})
}

// WorkloadClientset returns a client-go clientset for a kubeconfig, cached.
func WorkloadClientset(kubeconfig []byte) (kubernetes.Interface, error) {
	return clientsets.get(kubeconfig, func(cfg *rest.Config) (kubernetes.Interface, error) {
		return kubernetes.NewForConfig(cfg)
	})
}
