package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// clusterLabel marks a workload Node with the cluster it belongs to.
const clusterLabel = "bench.ferry.dev/cluster"

// workloadProxy lets one API server stand for many workload clusters: each
// cluster's kubeconfig points at <proxy>/clusters/<name>, and the proxy
// forwards to the shared API server, adding a label selector to Node
// requests so that each cluster sees only its own Nodes. It counts the
// requests it forwards.
type workloadProxy struct {
	srv      *httptest.Server
	requests atomic.Int64
}

func startWorkloadProxy(k *testenv.Kube) (*workloadProxy, error) {
	target, err := url.Parse(k.Config.Host)
	if err != nil {
		return nil, err
	}
	transport, err := rest.TransportFor(k.Config)
	if err != nil {
		return nil, err
	}
	p := &workloadProxy{}
	rp := &httputil.ReverseProxy{
		Transport:     transport,
		FlushInterval: -1,
		Rewrite: func(r *httputil.ProxyRequest) {
			rest := strings.TrimPrefix(r.In.URL.Path, "/clusters/")
			cluster, path, _ := strings.Cut(rest, "/")
			r.SetURL(target)
			r.Out.URL.Path = "/" + path
			r.Out.URL.RawPath = ""
			if path == "api/v1/nodes" {
				q := r.Out.URL.Query()
				sel := clusterLabel + "=" + cluster
				if s := q.Get("labelSelector"); s != "" {
					sel += "," + s
				}
				q.Set("labelSelector", sel)
				r.Out.URL.RawQuery = q.Encode()
			}
		},
	}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		rp.ServeHTTP(w, r)
	}))
	return p, nil
}

// kubeconfig is the kubeconfig of cluster through the proxy.
func (p *workloadProxy) kubeconfig(cluster string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[cluster] = &clientcmdapi.Cluster{Server: p.srv.URL + "/clusters/" + cluster}
	cfg.AuthInfos[cluster] = &clientcmdapi.AuthInfo{}
	cfg.Contexts[cluster] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: cluster}
	cfg.CurrentContext = cluster
	return clientcmd.Write(*cfg)
}

// fleet is the benchmark's clusters: seed 000 clusters to adopt, as
// testenv.Orphan makes one, each with a control-plane node and workers
// whose servers are in the cloud stand-in. Ferry's fleet and the kubectl
// baseline's differ in namespace and name prefix, so that names do not
// collide in the shared workload API server and cloud stand-in.
type fleet struct {
	namespace string
	prefix    string
	names     []string
	workers   int
}

func (f *fleet) clusterName(i int) string { return fmt.Sprintf("%s%04d", f.prefix, i) }

// create makes n clusters as testenv.Orphan does, each reached through
// the proxy, with its Nodes labelled for it and their servers in the cloud
// stand-in; concurrency 8.
func (f *fleet) create(p testenv.T, mgmt, workload *testenv.Kube, proxy *workloadProxy, cloud *cloudStandIn, n int) error {
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				name := f.clusterName(i)
				kubeconfig, err := proxy.kubeconfig(name)
				if err != nil {
					errs <- err
					continue
				}
				workers := make([]string, f.workers)
				for w := range workers {
					workers[w] = fmt.Sprintf("%s-md-0-%d", name, w)
				}
				testenv.Orphan(p, mgmt, workload, testenv.OrphanedCluster{
					Name: name, Namespace: f.namespace, BackupNamespace: f.namespace + "-backup",
					ControlPlaneNodes: []string{name + "-control-plane-0"}, WorkerNodes: workers, KubeletVersion: "v1.31.4",
					Kubeconfig: kubeconfig, NodeLabels: map[string]string{clusterLabel: name},
					ProviderID: func(node string) string { return step.ProviderIDPrefix + cloud.addServer(node) },
				})
			}
		}()
	}
	for i := range n {
		f.names = append(f.names, f.clusterName(i))
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	return nil
}

func createIgnoreExists(ctx context.Context, c client.Client, obj client.Object) error {
	if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %T %s: %w", obj, obj.GetName(), err)
	}
	return nil
}

// plan is the adopt plan of cluster i, approved up to approve.
func (f *fleet) plan(i int, approve string) string {
	name := f.clusterName(i)
	return fmt.Sprintf(`apiVersion: ferry.dev/v1alpha1
kind: MigrationPlan
metadata:
  name: %[1]s
spec:
  cluster: {name: %[1]s, namespace: %[2]s}
  strategy: adopt
  adopt: {secretsFrom: %[2]s-backup}
  target:
    identity:
      cloudName: openstack
      from: {namespace: ferry-system, name: openstack-credentials}
    externalNetwork: {name: %[3]s}
    network: {name: %[4]s}
    sshKey: {name: %[9]s, publicKey: "%[10]s"}
    controlPlane: {provider: KubeadmControlPlane, flavor: %[5]s, image: %[6]s}
    workers:
      - {name: md-0, flavor: %[5]s, image: %[6]s, replicas: %[7]d}
  manifests:
    cloudControllerManager: {path: manifests/ccm.yaml}
  approve: %[8]s
`, name, f.namespace, cloudExternal, cloudNetwork, cloudFlavor, cloudImage, f.workers, approve, sshKeyName(name), sshPublicKey)
}

// sshPublicKey is every cluster's SSH key, which ferry creates in the cloud
// stand-in as sshKeyName(cluster).
const sshPublicKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZlcnJ5LWV4YW1wbGUta2V5LW5vdC1yZWFsAA bench@ferry"

func sshKeyName(cluster string) string { return "bench-key-" + cluster }
