package kube

import (
	"reflect"
	"testing"

	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/bootstrap/kubeadm/api/v1beta1"
)

// TestKubeParseClusterConfiguration: the ClusterConfiguration of both
// kubeadm API versions that clusters run with becomes the same CAPI
// configuration and clusterNetwork.
func TestKubeParseClusterConfiguration(t *testing.T) {
	wantCC := &bootstrapv1.ClusterConfiguration{
		ClusterName:          "capi-quickstart",
		KubernetesVersion:    "v1.31.4",
		ControlPlaneEndpoint: "10.0.0.10:6443",
		ImageRepository:      "registry.k8s.io",
		CertificatesDir:      "/etc/kubernetes/pki",
		Networking:           bootstrapv1.Networking{ServiceSubnet: "10.96.0.0/12", PodSubnet: "192.168.0.0/16,fd00::/56", DNSDomain: "cluster.local"},
		APIServer: bootstrapv1.APIServer{
			ControlPlaneComponent: bootstrapv1.ControlPlaneComponent{
				ExtraArgs:    map[string]string{"audit-log-path": "/var/log/audit.log", "cloud-provider": "external"},
				ExtraVolumes: []bootstrapv1.HostPathMount{{Name: "audit", HostPath: "/var/log", MountPath: "/var/log"}},
			},
			CertSANs: []string{"api.example.org"},
		},
		ControllerManager: bootstrapv1.ControlPlaneComponent{ExtraArgs: map[string]string{"cloud-provider": "external"}},
		Etcd:              bootstrapv1.Etcd{Local: &bootstrapv1.LocalEtcd{DataDir: "/var/lib/etcd", ExtraArgs: map[string]string{"quota-backend-bytes": "8589934592"}}},
	}
	wantNet := &clusterv1.ClusterNetwork{
		Pods:          &clusterv1.NetworkRanges{CIDRBlocks: []string{"192.168.0.0/16", "fd00::/56"}},
		Services:      &clusterv1.NetworkRanges{CIDRBlocks: []string{"10.96.0.0/12"}},
		ServiceDomain: "cluster.local",
	}
	for _, tc := range []struct {
		name    string
		raw     string
		wantCC  *bootstrapv1.ClusterConfiguration
		wantNet *clusterv1.ClusterNetwork
		wantErr bool
	}{{
		name: "kubeadm.k8s.io/v1beta3: extraArgs as maps",
		raw: `apiVersion: kubeadm.k8s.io/v1beta3
kind: ClusterConfiguration
clusterName: capi-quickstart
kubernetesVersion: v1.31.4
controlPlaneEndpoint: 10.0.0.10:6443
imageRepository: registry.k8s.io
certificatesDir: /etc/kubernetes/pki
networking: {serviceSubnet: 10.96.0.0/12, podSubnet: "192.168.0.0/16,fd00::/56", dnsDomain: cluster.local}
apiServer:
  certSANs: [api.example.org]
  extraArgs: {audit-log-path: /var/log/audit.log, cloud-provider: external}
  extraVolumes: [{name: audit, hostPath: /var/log, mountPath: /var/log}]
  timeoutForControlPlane: 4m0s
controllerManager: {extraArgs: {cloud-provider: external}}
scheduler: {}
dns: {}
etcd: {local: {dataDir: /var/lib/etcd, extraArgs: {quota-backend-bytes: "8589934592"}}}
`,
		wantCC: wantCC, wantNet: wantNet,
	}, {
		name: "kubeadm.k8s.io/v1beta4: extraArgs as name/value lists",
		raw: `apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
clusterName: capi-quickstart
kubernetesVersion: v1.31.4
controlPlaneEndpoint: 10.0.0.10:6443
imageRepository: registry.k8s.io
certificatesDir: /etc/kubernetes/pki
networking: {serviceSubnet: 10.96.0.0/12, podSubnet: "192.168.0.0/16,fd00::/56", dnsDomain: cluster.local}
apiServer:
  certSANs: [api.example.org]
  extraArgs: [{name: audit-log-path, value: /var/log/audit.log}, {name: cloud-provider, value: external}]
  extraVolumes: [{name: audit, hostPath: /var/log, mountPath: /var/log}]
controllerManager: {extraArgs: [{name: cloud-provider, value: external}]}
etcd: {local: {dataDir: /var/lib/etcd, extraArgs: [{name: quota-backend-bytes, value: "8589934592"}]}}
encryptionAlgorithm: RSA-2048
`,
		wantCC: wantCC, wantNet: wantNet,
	}, {
		name:   "as testenv.Orphan writes it: a version and nothing else",
		raw:    "apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\nkubernetesVersion: v1.31.4\n",
		wantCC: &bootstrapv1.ClusterConfiguration{KubernetesVersion: "v1.31.4"},
	}, {
		name: "external etcd",
		raw:  "etcd: {external: {endpoints: [https://etcd:2379], caFile: /ca, certFile: /crt, keyFile: /key}}\n",
		wantCC: &bootstrapv1.ClusterConfiguration{Etcd: bootstrapv1.Etcd{External: &bootstrapv1.ExternalEtcd{
			Endpoints: []string{"https://etcd:2379"}, CAFile: "/ca", CertFile: "/crt", KeyFile: "/key"}}},
	}, {
		name:    "extraArgs of neither form",
		raw:     "apiServer: {extraArgs: 42}\n",
		wantErr: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cc, err := parseClusterConfiguration(tc.raw)
			if tc.wantErr {
				if err == nil {
					t.Fatal("parsed; want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cc.capi(); !reflect.DeepEqual(got, tc.wantCC) {
				t.Errorf("ClusterConfiguration\n got  %+v\n want %+v", got, tc.wantCC)
			}
			if got := cc.clusterNetwork(); !reflect.DeepEqual(got, tc.wantNet) {
				t.Errorf("clusterNetwork = %+v; want %+v", got, tc.wantNet)
			}
		})
	}
}

// TestKubeParseServer: the control-plane endpoint from a kubeconfig's
// server URL.
func TestKubeParseServer(t *testing.T) {
	for _, tc := range []struct {
		server  string
		want    clusterv1.APIEndpoint
		wantErr bool
	}{
		{server: "https://10.0.0.10:6443", want: clusterv1.APIEndpoint{Host: "10.0.0.10", Port: 6443}},
		{server: "https://api.example.org", want: clusterv1.APIEndpoint{Host: "api.example.org", Port: 443}},
		{server: "https://[fd00::10]:6443", want: clusterv1.APIEndpoint{Host: "fd00::10", Port: 6443}},
		{server: "", wantErr: true},
		{server: "https://10.0.0.10:0", wantErr: true},
	} {
		got, err := parseServer(tc.server)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("parseServer(%q) = %v, %v; want %v (error %t)", tc.server, got, err, tc.want, tc.wantErr)
		}
	}
}
