package app

import (
	"fmt"
	"net/http"
	"sync/atomic"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/kube"
)

// RESTConfigGetter loads the management cluster's REST config the way
// kubectl does (an explicit kubeconfig, else $KUBECONFIG, else
// ~/.kube/config, else in-cluster); client-go's genericclioptions
// ConfigFlags is one.
type RESTConfigGetter interface {
	ToRESTConfig() (*rest.Config, error)
}

// management connects to the management cluster and counts the requests
// sent to its API server (ferry_kube_requests_total): one per command run.
type management struct {
	getter   RESTConfigGetter
	requests atomic.Uint64
}

// config is the management cluster's REST config with ferry's rate limits,
// counting requests.
func (m *management) config() (*rest.Config, error) {
	if m.getter == nil {
		return nil, fmt.Errorf("load kubeconfig: no kubeconfig flags")
	}
	cfg, err := m.getter.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	kube.Tune(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			m.requests.Add(1)
			return rt.RoundTrip(r)
		})
	})
	return cfg, nil
}

// client is a client of the management cluster, with watch: the kube
// executor's waits watch rather than poll.
func (m *management) client() (client.WithWatch, error) {
	cfg, err := m.config()
	if err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: kube.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.Host, err)
	}
	return c, nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
