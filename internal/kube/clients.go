package kube

import (
	"crypto/sha256"
	"fmt"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Client-side rate limits of ferry's clients. client-go's defaults (5
// requests per second, bursts of 10) throttle a reconciler that plans a
// fleet; the API server's priority and fairness still protects itself.
const (
	QPS   = 50
	Burst = 100
)

// Tune sets ferry's client-side rate limits on cfg and returns it.
func Tune(cfg *rest.Config) *rest.Config {
	cfg.QPS, cfg.Burst = QPS, Burst
	return cfg
}

// maxCachedClients bounds the workload client cache; past it the cache
// starts over (a fleet larger than this reconnects now and then).
const maxCachedClients = 4096

// clients caches workload clients by kubeconfig, so that each cycle and
// each step reuse the connection and the API discovery of the last one
// instead of building them again. A kubeconfig whose credentials change is
// a new key.
var clients = struct {
	sync.Mutex
	crc map[[32]byte]client.Client
	cs  map[[32]byte]kubernetes.Interface
}{crc: map[[32]byte]client.Client{}, cs: map[[32]byte]kubernetes.Interface{}}

func restConfig(kubeconfig []byte) (*rest.Config, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("parse kubeconfig: %w", err)
	}
	return Tune(cfg), nil
}

// WorkloadClient returns a controller-runtime client with ferry's scheme
// for a kubeconfig, cached.
func WorkloadClient(kubeconfig []byte) (client.Client, error) {
	key := sha256.Sum256(kubeconfig)
	clients.Lock()
	defer clients.Unlock()
	if c, ok := clients.crc[key]; ok {
		return c, nil
	}
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := workloadMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme(), HTTPClient: httpClient, Mapper: mapper})
	if err != nil {
		return nil, err
	}
	if len(clients.crc) >= maxCachedClients {
		clients.crc = map[[32]byte]client.Client{}
	}
	clients.crc[key] = c
	return c, nil
}

// WorkloadClientset returns a client-go clientset for a kubeconfig, cached.
func WorkloadClientset(kubeconfig []byte) (kubernetes.Interface, error) {
	key := sha256.Sum256(kubeconfig)
	clients.Lock()
	defer clients.Unlock()
	if c, ok := clients.cs[key]; ok {
		return c, nil
	}
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if len(clients.cs) >= maxCachedClients {
		clients.cs = map[[32]byte]kubernetes.Interface{}
	}
	clients.cs[key] = c
	return c, nil
}
