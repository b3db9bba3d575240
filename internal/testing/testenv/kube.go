package testenv

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ferry-dev/ferry/internal/kube"
)

// Kube is a running Kubernetes API server with the CAPI, CAPO and Kamaji
// CRDs installed.
type Kube struct {
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Client is a controller-runtime client with ferry's scheme.
	Client client.Client
	// Scheme is the scheme Client uses.
	Scheme *runtime.Scheme
	// AuditLog is the API server's audit log: one JSON event per line for
	// every create and delete (auditPolicy), which is how a test counts
	// objects created twice.
	AuditLog string

	// env is the envtest environment, kept so that RestartAPIServer can
	// stop and start its kube-apiserver.
	env *envtest.Environment
	// pki and nodes are KubeOptions', for real nodes (Host.StartNodes).
	pki   *PKI
	nodes bool
}

// quietControllerRuntime stops controller-runtime from warning, 30 seconds
// into a test, that its global logger was never set.
var quietControllerRuntime sync.Once

// StartKube starts etcd and kube-apiserver (built by `make tools`) with every
// CRD ferry works with, and stops them when the test ends. It takes a few
// seconds; start it once per test that needs it.
func StartKube(t T) *Kube {
	t.Helper()
	return StartKubeWith(t, KubeOptions{})
}

// KubeOptions are the settings of a workload cluster's API server.
type KubeOptions struct {
	// PKI gives the API server a cluster's authorities and
	// service-account key (nil: envtest's own).
	PKI *PKI
	// Address is the IP address the API server listens on, e.g. a
	// floating IP of the local OpenStack on a loopback subnet (empty:
	// 127.0.0.1). It needs a PKI, whose CA signs a certificate for it.
	Address string
	// Nodes makes the API server take real kubelets (Host.StartNodes) as
	// a kubeadm cluster's does: Node authorization and the NodeRestriction
	// admission plugin, and the ServiceAccount admission plugin that
	// mounts a pod's token (envtest turns it off). It needs a PKI and an
	// Address that the nodes reach: a Network's HostIP.
	Nodes bool
}

// StartKubeWith is StartKube with opts.
func StartKubeWith(t T, opts KubeOptions) *Kube {
	t.Helper()
	quietControllerRuntime.Do(func() { ctrllog.SetLogger(logr.Discard()) })

	bin := kubeBinaries(t)
	crds, err := parsedCRDs()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	// etcd starts on a copy of the template: the API server finds its
	// bootstrap done and the CRDs created (etcdtemplate.go).
	template, err := etcdTemplate(t, bin, crds)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	data := filepath.Join(t.TempDir(), "etcd")
	if err := copyEtcdData(template, data); err != nil {
		t.Fatalf("testenv: copy the etcd template %s: %v", template, err)
	}

	scheme := kube.Scheme()
	env := &envtest.Environment{
		BinaryAssetsDirectory: bin,
		Scheme:                scheme,
		// Generous: two API servers starting at once on a loaded 2-core
		// machine take far longer than the usual 7 seconds.
		ControlPlaneStartTimeout: 2 * time.Minute,
	}
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: data}
	auditLog := setUpAPIServer(t, env, opts)
	start := time.Now()
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("testenv: start API server from %s: %v", bin, err)
	}
	// Served once discovery lists them (the API server's informers have
	// them established already).
	if err := envtest.WaitForCRDs(cfg, crds, envtest.CRDInstallOptions{PollInterval: 50 * time.Millisecond, MaxTime: time.Minute}); err != nil {
		_ = env.Stop()
		t.Fatalf("testenv: API server at %s: the CRDs of the etcd template %s: %v", cfg.Host, template, err)
	}
	t.Logf("testenv: API server with %d CRDs ready at %s in %s", len(crds), cfg.Host, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("testenv: stop API server: %v", err)
		}
	})

	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("testenv: client for %s: %v", cfg.Host, err)
	}
	return &Kube{Config: cfg, Client: c, Scheme: scheme, env: env, AuditLog: auditLog, pki: opts.PKI, nodes: opts.Nodes}
}

// kubeBinaries returns the directory of kube-apiserver and etcd, failing
// the test with what to run when they were not built.
func kubeBinaries(t T) string {
	t.Helper()
	bin, err := toolsDir()
	if err != nil {
		t.Fatalf("testenv: find kube-apiserver: %v", err)
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			t.Fatalf("testenv: %s not found in %s: run `make tools` (`make test` builds it when missing)", name, bin)
		}
	}
	return bin
}

// setUpAPIServer configures env's kube-apiserver before it starts: the
// cluster's PKI and address when opts give them, a certificate directory
// that outlives a restart, a quick stop despite open watches, and an audit
// log of creates and deletes, whose path it returns.
func setUpAPIServer(t T, env *envtest.Environment, opts KubeOptions) string {
	t.Helper()
	if opts.Address != "" && opts.PKI == nil {
		t.Fatalf("testenv: an API server on %s needs a PKI to sign its certificate", opts.Address)
	}
	if opts.PKI != nil {
		api := env.ControlPlane.GetAPIServer()
		opts.PKI.configureAPIServer(t, api, opts.Address)
		if opts.Address != "" {
			api.SecureServing.Address = opts.Address
			_, api.SecureServing.Port, _ = net.SplitHostPort(freeAddrOn(t, opts.Address))
		}
	}
	api := env.ControlPlane.GetAPIServer()
	if opts.Nodes {
		if opts.PKI == nil || opts.Address == "" {
			t.Fatalf("testenv: an API server for real nodes needs a PKI and an Address the nodes reach")
		}
		api.Configure().Set("authorization-mode", "Node,RBAC").Set("enable-admission-plugins", "NodeRestriction").
			Disable("disable-admission-plugins")
	}
	if api.CertDir == "" {
		// A certificate directory that envtest creates itself is deleted
		// when the API server stops; RestartAPIServer needs the serving
		// certificate (which clients trust) and the service-account keys
		// to outlive a stop.
		api.CertDir = t.TempDir()
	}
	// Without a grace period for watches, kube-apiserver ignores them when
	// it is told to stop, and then waits up to a minute for their
	// connections to go idle; with one, it ends them at once. An informer
	// still running would otherwise make every stop time out.
	api.Configure().Set("shutdown-watch-termination-grace-period", "5s")
	auditDir := t.TempDir()
	policy := filepath.Join(auditDir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	auditLog := filepath.Join(auditDir, "audit.log")
	api.Configure().Set("audit-policy-file", policy).Set("audit-log-path", auditLog).Set("audit-log-format", "json")
	return auditLog
}

// auditPolicy records creates and deletes (who, what, the answer's code)
// once each, when the answer is sent, and nothing else: cheap enough for
// every test.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted, Panic]
rules:
  - level: Metadata
    verbs: [create, delete, deletecollection]
  - level: None
`

// Kubeconfig renders the API server's admin credentials as a kubeconfig,
// as a CAPI <cluster>-kubeconfig Secret or a --kubeconfig file holds it.
func (k *Kube) Kubeconfig(t T) []byte {
	t.Helper()
	return k.KubeconfigAs(t, "")
}

// KubeconfigAs is Kubeconfig impersonating user (e.g.
// "system:serviceaccount:ferry-system:ferry-reconciler"), so that what the
// kubeconfig may do is what RBAC grants user; "" impersonates nobody.
func (k *Kube) KubeconfigAs(t T, user string) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{
		Server:                   k.Config.Host,
		CertificateAuthorityData: k.Config.CAData,
	}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: k.Config.CertData,
		ClientKeyData:         k.Config.KeyData,
		Token:                 k.Config.BearerToken,
		Impersonate:           user,
	}
	if strings.HasPrefix(user, "system:serviceaccount:") {
		ns, _, _ := strings.Cut(strings.TrimPrefix(user, "system:serviceaccount:"), ":")
		cfg.AuthInfos["admin"].ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	cfg.CurrentContext = "envtest"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatalf("testenv: write kubeconfig: %v", err)
	}
	return data
}
