package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	kubeclient "github.com/ferry-dev/ferry/internal/kube"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/bootstrap/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/ferry-dev/ferry/internal/failure"
)

// The running cluster's configuration comes from two places: the server
// URL of the kubeconfig in the <cluster>-kubeconfig Secret (the control-plane
// endpoint) and, through that kubeconfig, the ClusterConfiguration that
// kubeadm keeps in the workload cluster's kube-system/kubeadm-config
// ConfigMap (the kubeadm spec the control plane runs with).

// connectWorkload reads the workload cluster's kubeconfig and builds
// what the step needs of it with build.
func connectWorkload[C any](ctx context.Context, e *Executor, s *job, build func([]byte) (C, error)) (C, error) {
	return kubeclient.ConnectWorkload(ctx, e.Client, s.clusterNamespace(), s.cluster(), build)
}

// endpoint reads the control-plane endpoint from the kubeconfig: the
// server of its current context, or of its only cluster. A parse error is
// reported without the parser's message, which may quote credentials.
func (e *Executor) endpoint(ctx context.Context, s *job) (clusterv1.APIEndpoint, error) {
	cfg, err := connectWorkload(ctx, e, s, clientcmd.Load)
	if err != nil {
		return clusterv1.APIEndpoint{}, err
	}
	server := ""
	if kctx := cfg.Contexts[cfg.CurrentContext]; kctx != nil && cfg.Clusters[kctx.Cluster] != nil {
		server = cfg.Clusters[kctx.Cluster].Server
	} else if len(cfg.Clusters) == 1 {
		for _, c := range cfg.Clusters {
			server = c.Server
		}
	}
	ep, err := parseServer(server)
	if err != nil {
		where := kubeclient.KubeconfigSecret(s.clusterNamespace(), s.cluster())
		return clusterv1.APIEndpoint{}, failure.Terminal(fmt.Errorf("kubeconfig in %s: %w", where, err))
	}
	return ep, nil
}

// parseServer turns a kubeconfig server URL into host and port; the
// port defaults to the scheme's.
func parseServer(server string) (clusterv1.APIEndpoint, error) {
	u, err := url.Parse(server)
	if err != nil || u.Hostname() == "" {
		return clusterv1.APIEndpoint{}, fmt.Errorf("server %q is not a URL with a host", server)
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	n, err := strconv.ParseInt(port, 10, 32)
	if err != nil || n <= 0 || n > 65535 {
		return clusterv1.APIEndpoint{}, fmt.Errorf("server %q has no valid port", server)
	}
	return clusterv1.APIEndpoint{Host: u.Hostname(), Port: int32(n)}, nil
}

// runningKubeadm reads the workload cluster's ClusterConfiguration;
// nil without error when the ConfigMap does not exist. An unreachable
// workload cluster is retryable.
func (e *Executor) runningKubeadm(ctx context.Context, s *job) (*kubeadmClusterConfig, error) {
	build := e.Workload
	if build == nil {
		build = kubeclient.WorkloadClient
	}
	wc, err := connectWorkload(ctx, e, s, build)
	if err != nil {
		return nil, err
	}
	var cm corev1.ConfigMap
	err = wc.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kubeadm-config"}, &cm)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read kube-system/kubeadm-config of workload cluster %s: %w", s.cluster(), err)
	}
	raw, ok := cm.Data["ClusterConfiguration"]
	if !ok {
		return nil, failure.Terminal(fmt.Errorf("kube-system/kubeadm-config of workload cluster %s has no ClusterConfiguration", s.cluster()))
	}
	cc, err := parseClusterConfiguration(raw)
	if err != nil {
		return nil, failure.Terminal(fmt.Errorf("kube-system/kubeadm-config of workload cluster %s: %w", s.cluster(), err))
	}
	return cc, nil
}

// requireKubeadm is runningKubeadm for the objects that cannot do
// without it: a missing ConfigMap is terminal.
func (e *Executor) requireKubeadm(ctx context.Context, s *job) (*kubeadmClusterConfig, error) {
	cc, err := e.runningKubeadm(ctx, s)
	if err == nil && cc == nil {
		err = failure.Terminal(fmt.Errorf("create %s: ConfigMap kube-system/kubeadm-config not found in workload cluster %s: the running kubeadm spec cannot be recovered",
			s.target(), s.cluster()))
	}
	return cc, err
}

// kubeadmClusterConfig is the part of kubeadm's ClusterConfiguration that
// ferry carries into CAPI: what a new control-plane machine must agree on
// with the running ones (version, endpoint, networks, certificate SANs,
// image repository, etcd, and the control-plane components' flags and host
// mounts). It reads kubeadm.k8s.io/v1beta3 and v1beta4, which differ in
// the form of extraArgs; anything else in the ConfigMap (DNS image,
// timeouts, patches) is left to CAPI's defaults.
type kubeadmClusterConfig struct {
	ClusterName          string          `json:"clusterName"`
	KubernetesVersion    string          `json:"kubernetesVersion"`
	ControlPlaneEndpoint string          `json:"controlPlaneEndpoint"`
	ImageRepository      string          `json:"imageRepository"`
	CertificatesDir      string          `json:"certificatesDir"`
	FeatureGates         map[string]bool `json:"featureGates"`
	Networking           struct {
		ServiceSubnet string `json:"serviceSubnet"`
		PodSubnet     string `json:"podSubnet"`
		DNSDomain     string `json:"dnsDomain"`
	} `json:"networking"`
	APIServer struct {
		kubeadmComponent
		CertSANs []string `json:"certSANs"`
	} `json:"apiServer"`
	ControllerManager kubeadmComponent `json:"controllerManager"`
	Scheduler         kubeadmComponent `json:"scheduler"`
	Etcd              struct {
		Local *struct {
			DataDir        string      `json:"dataDir"`
			ExtraArgs      kubeadmArgs `json:"extraArgs"`
			ServerCertSANs []string    `json:"serverCertSANs"`
			PeerCertSANs   []string    `json:"peerCertSANs"`
		} `json:"local"`
		External *bootstrapv1.ExternalEtcd `json:"external"`
	} `json:"etcd"`
}

// kubeadmComponent is a control-plane component's flags and host mounts.
type kubeadmComponent struct {
	ExtraArgs    kubeadmArgs                 `json:"extraArgs"`
	ExtraVolumes []bootstrapv1.HostPathMount `json:"extraVolumes"`
}

// kubeadmArgs are extraArgs in either form: a map (v1beta3) or a list of
// name/value pairs (v1beta4; a name given twice keeps its last value, as
// CAPI's map form can hold only one).
type kubeadmArgs map[string]string

// UnmarshalJSON reads both forms.
func (a *kubeadmArgs) UnmarshalJSON(b []byte) error {
	var m map[string]string
	if err := json.Unmarshal(b, &m); err == nil {
		*a = m
		return nil
	}
	var list []struct{ Name, Value string }
	if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("extraArgs is neither a map nor a list of name/value pairs: %w", err)
	}
	*a = kubeadmArgs{}
	for _, arg := range list {
		(*a)[arg.Name] = arg.Value
	}
	return nil
}

func parseClusterConfiguration(raw string) (*kubeadmClusterConfig, error) {
	var cc kubeadmClusterConfig
	if err := yaml.Unmarshal([]byte(raw), &cc); err != nil {
		return nil, fmt.Errorf("parse ClusterConfiguration: %w", err)
	}
	return &cc, nil
}

// capi converts to CAPI's ClusterConfiguration.
func (cc *kubeadmClusterConfig) capi() *bootstrapv1.ClusterConfiguration {
	out := &bootstrapv1.ClusterConfiguration{
		ClusterName:          cc.ClusterName,
		KubernetesVersion:    cc.KubernetesVersion,
		ControlPlaneEndpoint: cc.ControlPlaneEndpoint,
		ImageRepository:      cc.ImageRepository,
		CertificatesDir:      cc.CertificatesDir,
		FeatureGates:         cc.FeatureGates,
		Networking: bootstrapv1.Networking{
			ServiceSubnet: cc.Networking.ServiceSubnet,
			PodSubnet:     cc.Networking.PodSubnet,
			DNSDomain:     cc.Networking.DNSDomain,
		},
		APIServer: bootstrapv1.APIServer{
			ControlPlaneComponent: cc.APIServer.capi(),
			CertSANs:              cc.APIServer.CertSANs,
		},
		ControllerManager: cc.ControllerManager.capi(),
		Scheduler:         cc.Scheduler.capi(),
	}
	if l := cc.Etcd.Local; l != nil {
		out.Etcd.Local = &bootstrapv1.LocalEtcd{DataDir: l.DataDir, ExtraArgs: l.ExtraArgs, ServerCertSANs: l.ServerCertSANs, PeerCertSANs: l.PeerCertSANs}
	}
	out.Etcd.External = cc.Etcd.External
	return out
}

func (c kubeadmComponent) capi() bootstrapv1.ControlPlaneComponent {
	return bootstrapv1.ControlPlaneComponent{ExtraArgs: c.ExtraArgs, ExtraVolumes: c.ExtraVolumes}
}

// clusterNetwork is the Cluster's clusterNetwork that matches the running
// one; nil when kubeadm recorded none.
func (cc *kubeadmClusterConfig) clusterNetwork() *clusterv1.ClusterNetwork {
	n := cc.Networking
	if n.PodSubnet == "" && n.ServiceSubnet == "" && n.DNSDomain == "" {
		return nil
	}
	cidrs := func(s string) *clusterv1.NetworkRanges {
		if s == "" {
			return nil
		}
		return &clusterv1.NetworkRanges{CIDRBlocks: strings.Split(s, ",")}
	}
	return &clusterv1.ClusterNetwork{Pods: cidrs(n.PodSubnet), Services: cidrs(n.ServiceSubnet), ServiceDomain: n.DNSDomain}
}

// nodeRegistration is how machines CAPO builds register: under the
// instance's host name, with the external (OpenStack) cloud provider, as
// CAPO's own cluster templates have it.
func nodeRegistration(kubeletArgs map[string]string) bootstrapv1.NodeRegistrationOptions {
	if kubeletArgs == nil {
		kubeletArgs = map[string]string{"cloud-provider": "external"}
	}
	return bootstrapv1.NodeRegistrationOptions{Name: "{{ local_hostname }}", KubeletExtraArgs: kubeletArgs}
}

// controlPlaneSpec is the kubeadmConfigSpec of the KubeadmControlPlane
// and, without its InitConfiguration, of each adopted node's KubeadmConfig.
// Both carry the same ClusterConfiguration and JoinConfiguration, so that
// KubeadmControlPlane finds the adopted machines up to date and does not
// roll them; the node registration is the one machines CAPO builds later
// need. The running nodes never read these: they joined long ago.
func controlPlaneSpec(cc *kubeadmClusterConfig, withInit bool) bootstrapv1.KubeadmConfigSpec {
	spec := bootstrapv1.KubeadmConfigSpec{
		ClusterConfiguration: cc.capi(),
		JoinConfiguration: &bootstrapv1.JoinConfiguration{
			NodeRegistration: nodeRegistration(nil),
			ControlPlane:     &bootstrapv1.JoinControlPlane{},
		},
	}
	if withInit {
		spec.InitConfiguration = &bootstrapv1.InitConfiguration{NodeRegistration: nodeRegistration(nil)}
	}
	return spec
}
