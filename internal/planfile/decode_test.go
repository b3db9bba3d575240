package planfile

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// replacePlan is a valid replace plan with a kubeadm control plane. Tests
// change one thing in it; the line numbers in their expectations are this
// text's.
const replacePlan = `apiVersion: ferry.dev/v1alpha1
kind: MigrationPlan
metadata:
  name: shop
spec:
  cluster:
    name: shop
    namespace: tenants
  strategy: replace
  replace:
    oldMachineDeployments: [shop-vsphere-md-0]
  target:
    identity:
      from:
        name: openstack-credentials
    network: {name: tenants-net}
    sshKey:
      name: tenants-key
    controlPlane:
      provider: KubeadmControlPlane
      flavor: m1.medium
      image: ubuntu-2204
    workers:
      - name: md-0
        flavor: m1.large
        image: ubuntu-2204
        replicas: 2
      - name: md-1
        flavor: m1.large
        image: ubuntu-2204
        replicas: 1
  cutover:
    drainTimeout: 15m
    probeURL: https://shop.example.com/healthz
  approve: prepare
`

// kamajiPlan is a valid adopt plan with a Kamaji hosted control plane and
// calico, which brings the rules of seed 004.
const kamajiPlan = `apiVersion: ferry.dev/v1alpha1
kind: MigrationPlan
metadata:
  name: hosted
spec:
  cluster:
    name: hosted
  strategy: adopt
  target:
    identity:
      from:
        name: openstack-credentials
    network: {name: k8s-net}
    sshKey:
      name: capi-key
    apiServer:
      loadBalancer: false
      floatingIP: false
    cni: calico
    securityGroups:
      allNodesRules:
        - name: BGP
          direction: ingress
          protocol: tcp
          portRangeMin: 179
          portRangeMax: 179
          remoteManagedGroups: [worker]
        - name: IP-in-IP
          direction: ingress
          protocol: "4"
          remoteManagedGroups: [worker]
    controlPlane:
      provider: KamajiControlPlane
      kubelet:
        preferredAddressTypes: [InternalIP, ExternalIP, Hostname]
    workers:
      - name: md-0
        flavor: m1.large
        image: ubuntu-2204
        replicas: 1
  manifests:
    cloudControllerManager:
      path: manifests/openstack-ccm.yaml
      tolerations:
        - key: node.cluster.x-k8s.io/uninitialized
          operator: Exists
          effect: NoSchedule
  approve: cluster
`

// testFile is the path the plans of these tests are decoded as.
const testFile = "plans/shop.yaml"

// edit returns base with each old string of the pairs replaced by its new
// one. Every old string must occur exactly once, so that a change to the
// base plans cannot make a test quietly test nothing.
func edit(t *testing.T, base string, pairs ...string) string {
	t.Helper()
	if len(pairs)%2 != 0 {
		t.Fatalf("edit needs old, new pairs; got %d strings", len(pairs))
	}
	for i := 0; i < len(pairs); i += 2 {
		if n := strings.Count(base, pairs[i]); n != 1 {
			t.Fatalf("edit: %q occurs %d times in the plan; want once", pairs[i], n)
		}
		base = strings.Replace(base, pairs[i], pairs[i+1], 1)
	}
	return base
}

// decodeErrors decodes data and returns its problems as printed.
func decodeErrors(t *testing.T, data string) []string {
	t.Helper()
	f, err := Decode(testFile, []byte(data))
	if err == nil {
		return nil
	}
	if f != nil {
		t.Errorf("Decode returned a plan and an error")
	}
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("Decode error is %T, want planfile.Errors: %v", err, err)
	}
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Error()
	}
	return out
}

func TestDecodeBasesAreValid(t *testing.T) {
	for name, base := range map[string]string{"replacePlan": replacePlan, "kamajiPlan": kamajiPlan} {
		if errs := decodeErrors(t, base); len(errs) > 0 {
			t.Errorf("%s does not decode; the tests built from it would test the wrong thing:\n%s", name, strings.Join(errs, "\n"))
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	const secretMsg = "looks like a secret value; plans are in Git, so secrets may not be written in them. " +
		"Put it in a Secret in the management cluster and name that Secret (spec.target.identity.from for cloud credentials)"
	tests := []struct {
		name string
		data string
		want []string
	}{
		// Strict decoding.
		{
			name: "unknown field",
			data: edit(t, replacePlan, "  approve: prepare\n", "  approve: prepare\n  aprove: workers\n"),
			want: []string{`plans/shop.yaml:36: spec.aprove: unknown field; expected one of adopt, approve, cluster, cutover, manifests, replace, rollback, strategy, target, timeouts`},
		},
		{
			name: "unknown field in the second worker pool",
			data: edit(t, replacePlan, "        replicas: 1\n", "        replicas: 1\n        zone: az-2\n"),
			want: []string{`plans/shop.yaml:32: spec.target.workers[1].zone: unknown field; expected one of failureDomain, flavor, image, name, nodeSelector, replicas`},
		},
		{
			name: "misspelt required field in a pool is unknown and missing",
			data: edit(t, replacePlan, "        replicas: 1\n", "        replica: 1\n"),
			want: []string{
				`plans/shop.yaml:28: spec.target.workers[1].replicas: required field is missing`,
				`plans/shop.yaml:31: spec.target.workers[1].replica: unknown field; expected one of failureDomain, flavor, image, name, nodeSelector, replicas`,
			},
		},
		{
			name: "string for an integer",
			data: edit(t, replacePlan, "replicas: 1", "replicas: one"),
			want: []string{`plans/shop.yaml:31: spec.target.workers[1].replicas: expected an integer, got the string "one"`},
		},
		{
			name: "list for a mapping",
			data: edit(t, replacePlan, "network: {name: tenants-net}", "network: [tenants-net]"),
			want: []string{`plans/shop.yaml:16: spec.target.network: expected a mapping with fields id, name, got a list`},
		},
		{
			name: "integer for a string",
			data: edit(t, replacePlan, "  name: shop\nspec:", "  name: 42\nspec:"),
			want: []string{`plans/shop.yaml:4: metadata.name: expected a string, got the integer 42; quote it: "42"`},
		},
		{
			name: "cluster name too long for the names derived from it",
			data: edit(t, replacePlan, "  cluster:\n    name: shop\n", "  cluster:\n    name: "+strings.Repeat("a", 245)+"\n"),
			want: []string{`plans/shop.yaml:7: spec.cluster.name: is too long for the names ferry derives from it: "` + strings.Repeat("a", 245) +
				`-kubeconfig" would be 256 characters, Kubernetes allows 253`},
		},
		{
			name: "boolean for a string",
			data: edit(t, replacePlan, "name: tenants-key", "name: true"),
			want: []string{`plans/shop.yaml:18: spec.target.sshKey.name: expected a string, got the boolean true; quote it: "true"`},
		},
		{
			// YAML resolves an integer beyond 64 bits to a float.
			name: "integer too large",
			data: edit(t, replacePlan, "replicas: 1", "replicas: 99999999999999999999"),
			want: []string{`plans/shop.yaml:31: spec.target.workers[1].replicas: expected an integer, got the number 99999999999999999999`},
		},
		{
			name: "duplicate key",
			data: edit(t, replacePlan, "    name: shop\n", "    name: shop\n    name: shop2\n"),
			want: []string{`plans/shop.yaml:8: spec.cluster.name: duplicate key; first set on line 7`},
		},

		// Field rules.
		{
			name: "missing required field",
			data: edit(t, replacePlan, "kind: MigrationPlan\n", ""),
			want: []string{`plans/shop.yaml:1: kind: required field is missing`},
		},
		{
			name: "missing required field in a mapping",
			data: edit(t, replacePlan, "    sshKey:\n      name: tenants-key\n", "    sshKey: {}\n"),
			want: []string{`plans/shop.yaml:17: spec.target.sshKey.name: required field is missing`},
		},
		{
			name: "required field left empty",
			data: edit(t, replacePlan, "name: tenants-key", `name: ""`),
			want: []string{`plans/shop.yaml:18: spec.target.sshKey.name: required field is empty`},
		},
		{
			name: "empty list item",
			data: edit(t, replacePlan, "    workers:\n", "    workers:\n      -\n"),
			want: []string{`plans/shop.yaml:24: spec.target.workers[0]: empty list item; remove it or fill it in`},
		},
		{
			name: "required list left empty",
			data: edit(t, replacePlan, "[shop-vsphere-md-0]", "[]"),
			want: []string{`plans/shop.yaml:11: spec.replace.oldMachineDeployments: required field is empty`},
		},
		{
			name: "required mapping left null",
			data: edit(t, replacePlan, "    sshKey:\n      name: tenants-key\n", "    sshKey:\n"),
			want: []string{`plans/shop.yaml:17: spec.target.sshKey: required field is empty`},
		},
		{
			name: "enum",
			data: edit(t, replacePlan, "provider: KubeadmControlPlane", "provider: Kubeadm"),
			want: []string{`plans/shop.yaml:20: spec.target.controlPlane.provider: must be one of KubeadmControlPlane, KamajiControlPlane, got "Kubeadm"`},
		},
		{
			// The strategy's own rules would only say the same again.
			name: "unknown strategy is reported once",
			data: edit(t, replacePlan, "strategy: replace", "strategy: migrate"),
			want: []string{`plans/shop.yaml:9: spec.strategy: must be one of adopt, replace, got "migrate"`},
		},
		{
			name: "min",
			data: edit(t, replacePlan, "replicas: 1", "replicas: -2"),
			want: []string{`plans/shop.yaml:31: spec.target.workers[1].replicas: must be >= 1, got -2`},
		},
		{
			name: "bad Kubernetes name",
			data: edit(t, replacePlan, "    name: shop\n", "    name: Shop_1\n"),
			want: []string{`plans/shop.yaml:7: spec.cluster.name: "Shop_1" is not a valid Kubernetes name: expected lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters`},
		},
		{
			name: "bad Kubernetes label name",
			data: edit(t, replacePlan, "namespace: tenants", "namespace: tenants.a"),
			want: []string{`plans/shop.yaml:8: spec.cluster.namespace: "tenants.a" is not a valid Kubernetes name: expected lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters`},
		},
		{
			name: "bad duration",
			data: edit(t, replacePlan, "drainTimeout: 15m", "drainTimeout: 15 minutes"),
			want: []string{`plans/shop.yaml:33: spec.cutover.drainTimeout: expected a duration like 90s, 10m or 1h30m, got "15 minutes"`},
		},
		{
			name: "negative duration",
			data: edit(t, replacePlan, "drainTimeout: 15m", "drainTimeout: -15m"),
			want: []string{`plans/shop.yaml:33: spec.cutover.drainTimeout: must be a positive duration, got "-15m"`},
		},
		{
			name: "bad URL",
			data: edit(t, replacePlan, "probeURL: https://shop.example.com/healthz", "probeURL: shop.example.com/healthz"),
			want: []string{`plans/shop.yaml:34: spec.cutover.probeURL: expected an http:// or https:// URL, got "shop.example.com/healthz"`},
		},

		// Secrets.
		{
			name: "URL with a password",
			data: edit(t, replacePlan, "https://shop.example.com", "https://probe:hunter2@shop.example.com"),
			want: []string{`plans/shop.yaml:34: spec.cutover.probeURL: ` + secretMsg},
		},
		{
			name: "private key as publicKey",
			data: edit(t, replacePlan, "      name: tenants-key\n", "      name: tenants-key\n      publicKey: |\n        -----BEGIN OPENSSH PRIVATE KEY-----\n        b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n        -----END OPENSSH PRIVATE KEY-----\n"),
			want: []string{`plans/shop.yaml:19: spec.target.sshKey.publicKey: ` + secretMsg},
		},
		{
			name: "password key",
			data: edit(t, replacePlan, "        name: openstack-credentials\n", "        name: openstack-credentials\n        password: hunter2\n"),
			want: []string{`plans/shop.yaml:16: spec.target.identity.from.password: ` + secretMsg},
		},
		{
			name: "password key in a worker pool",
			data: edit(t, replacePlan, "        replicas: 2\n", "        replicas: 2\n        rootPassword: hunter2\n"),
			want: []string{`plans/shop.yaml:28: spec.target.workers[0].rootPassword: ` + secretMsg},
		},
		{
			name: "pasted clouds.yaml",
			data: edit(t, replacePlan, "      name: tenants-key\n", "      name: tenants-key\n      publicKey: \"auth: {username: admin, password: hunter2}\"\n"),
			want: []string{`plans/shop.yaml:19: spec.target.sshKey.publicKey: ` + secretMsg},
		},

		// Document shape.
		{
			name: "anchor and alias",
			data: edit(t, replacePlan, "        flavor: m1.large\n        image: ubuntu-2204\n        replicas: 2", "        flavor: &large m1.large\n        image: ubuntu-2204\n        replicas: 2", "        flavor: m1.large\n        image: ubuntu-2204\n        replicas: 1", "        flavor: *large\n        image: ubuntu-2204\n        replicas: 1"),
			want: []string{
				`plans/shop.yaml:25: spec.target.workers[0].flavor: YAML anchors and aliases are not supported in plans; write the value out`,
				`plans/shop.yaml:29: spec.target.workers[1].flavor: YAML anchors and aliases are not supported in plans; write the value out`,
			},
		},
		{
			name: "merge key",
			data: edit(t, replacePlan, "        replicas: 1\n", "        replicas: 1\n        <<: {failureDomain: az-2}\n"),
			want: []string{`plans/shop.yaml:32: spec.target.workers[1]: expected a field name, got !!merge "<<"`},
		},
		{
			name: "two documents",
			data: replacePlan + "---\n" + kamajiPlan,
			want: []string{`plans/shop.yaml:36: a second YAML document; a plan file holds exactly one MigrationPlan`},
		},
		{
			name: "empty file",
			data: "",
			want: []string{`plans/shop.yaml: file is empty; expected a MigrationPlan`},
		},
		{
			name: "only comments",
			data: "# to be written\n",
			want: []string{`plans/shop.yaml: file is empty; expected a MigrationPlan`},
		},
		{
			name: "syntax error",
			data: edit(t, replacePlan, "  strategy: replace\n", "  strategy: replace: now\n"),
			want: []string{`plans/shop.yaml:9: invalid YAML: mapping values are not allowed in this context`},
		},
		{
			name: "not a mapping",
			data: "- apiVersion: ferry.dev/v1alpha1\n",
			want: []string{`plans/shop.yaml:1: expected a mapping with fields apiVersion, kind, metadata, spec, got a list`},
		},

		// Strategy and phases.
		{
			name: "approve names a phase of the other strategy",
			data: edit(t, replacePlan, "approve: prepare", "approve: control-plane"),
			want: []string{`plans/shop.yaml:35: spec.approve: "control-plane" is not a phase of strategy replace; expected one of prepare, infrastructure, workers, cutover, cleanup`},
		},
		{
			name: "approve network-bridge without a VPN overlay",
			data: edit(t, replacePlan, "approve: prepare", "approve: network-bridge"),
			want: []string{`plans/shop.yaml:35: spec.approve: "network-bridge" is not a phase of strategy replace (it exists when spec.manifests.vpnOverlay names manifests); expected one of prepare, infrastructure, workers, cutover, cleanup`},
		},
		{
			name: "approve rollout without adopt.rollout",
			data: edit(t, kamajiPlan, "approve: cluster", "approve: rollout"),
			want: []string{`plans/shop.yaml:48: spec.approve: "rollout" is not a phase of strategy adopt (set spec.adopt.rollout: true to add it); expected one of cluster, control-plane, workers`},
		},
		{
			name: "rollback with a forward approval in the same commit",
			data: edit(t, kamajiPlan, "approve: cluster", "approve: workers\n  rollback: {to: cluster}"),
			want: []string{`plans/shop.yaml:48: spec.approve: workers is after spec.rollback.to cluster: a rollback and a forward approval cannot be in one commit; set spec.approve to cluster with the rollback, and raise it in a later commit that removes spec.rollback`},
		},
		{
			name: "rollback to none keeps approve empty",
			data: edit(t, kamajiPlan, "approve: cluster", "approve: cluster\n  rollback: {to: none}"),
			want: []string{`plans/shop.yaml:48: spec.approve: cluster is after spec.rollback.to none: a rollback and a forward approval cannot be in one commit; set spec.approve to "" (nothing) with the rollback, and raise it in a later commit that removes spec.rollback`},
		},
		{
			name: "rollback to a phase of the other strategy",
			data: edit(t, kamajiPlan, "approve: cluster", "approve: cluster\n  rollback: {to: cutover}"),
			want: []string{`plans/shop.yaml:49: spec.rollback.to: "cutover" is not a phase of strategy adopt; expected none or one of cluster, control-plane, workers`},
		},
		{
			name: "rollback to the point of no return",
			data: edit(t, replacePlan, "approve: prepare", "approve: prepare\n  rollback: {to: cleanup}"),
			want: []string{`plans/shop.yaml:36: spec.rollback.to: must be one of none, cluster, control-plane, workers, prepare, network-bridge, infrastructure, cutover, got "cleanup"`},
		},
		{
			name: "rollback without to",
			data: edit(t, replacePlan, "approve: prepare", "approve: prepare\n  rollback: {}"),
			want: []string{`plans/shop.yaml:36: spec.rollback.to: required field is missing`},
		},
		{
			name: "replace without workers",
			data: edit(t, replacePlan, "    workers:\n      - name: md-0\n        flavor: m1.large\n        image: ubuntu-2204\n        replicas: 2\n      - name: md-1\n        flavor: m1.large\n        image: ubuntu-2204\n        replicas: 1\n", ""),
			want: []string{`plans/shop.yaml:12: spec.target.workers: strategy replace needs at least one worker pool to move the workload onto`},
		},
		{
			name: "replace without old machine deployments",
			data: edit(t, replacePlan, "  replace:\n    oldMachineDeployments: [shop-vsphere-md-0]\n", ""),
			want: []string{`plans/shop.yaml:5: spec.replace.oldMachineDeployments: strategy replace needs the MachineDeployments of the old cloud, which it drains and deletes`},
		},
		{
			name: "adopt with cutover",
			data: edit(t, replacePlan, "strategy: replace", "strategy: adopt", "  replace:\n    oldMachineDeployments: [shop-vsphere-md-0]\n", "", "approve: prepare", "approve: cluster",
				"        replicas: 2\n", "        replicas: 2\n        nodeSelector: {pool: md-0}\n", "        replicas: 1\n", "        replicas: 1\n        nodeSelector: {pool: md-1}\n"),
			want: []string{`plans/shop.yaml:32: spec.cutover: applies to strategy replace only: adopt keeps the running nodes, so nothing is drained`},
		},
		{
			name: "replace with adopt options",
			data: edit(t, replacePlan, "  strategy: replace\n", "  strategy: replace\n  adopt: {rollout: true}\n"),
			want: []string{`plans/shop.yaml:10: spec.adopt: applies to strategy adopt only; this plan's strategy is replace`},
		},
		{
			name: "duplicate worker pool names",
			data: edit(t, replacePlan, "- name: md-1", "- name: md-0"),
			want: []string{`plans/shop.yaml:28: spec.target.workers[1].name: duplicate worker pool "md-0"; first at spec.target.workers[0]`},
		},
		{
			name: "name and id",
			data: edit(t, replacePlan, "network: {name: tenants-net}", "network: {name: tenants-net, id: 6c1f3a52-0b6e-4b5e-9a43-2f0c7f6bd2a1}"),
			want: []string{`plans/shop.yaml:16: spec.target.network: set name or id, not both`},
		},
		{
			name: "neither name nor id",
			data: edit(t, replacePlan, "network: {name: tenants-net}", "network: {}"),
			want: []string{`plans/shop.yaml:16: spec.target.network: set name or id`},
		},

		// KubeadmControlPlane.
		{
			name: "kubeadm without flavor",
			data: edit(t, replacePlan, "      flavor: m1.medium\n", ""),
			want: []string{`plans/shop.yaml:19: spec.target.controlPlane.flavor: required with KubeadmControlPlane: the control-plane machines need a flavor`},
		},
		{
			name: "kubeadm without image",
			data: edit(t, replacePlan, "      image: ubuntu-2204\n    workers:", "    workers:"),
			want: []string{`plans/shop.yaml:19: spec.target.controlPlane.image: required with KubeadmControlPlane: the control-plane machines need an image`},
		},

		// KamajiControlPlane (seed 004).
		{
			name: "kamaji with a load balancer",
			data: edit(t, kamajiPlan, "loadBalancer: false", "loadBalancer: true"),
			want: []string{`plans/shop.yaml:17: spec.target.apiServer.loadBalancer: must be false with KamajiControlPlane: Kamaji creates the control-plane endpoint itself, and a second load balancer from CAPO would compete with it`},
		},
		{
			name: "kamaji with a floating IP",
			data: edit(t, kamajiPlan, "floatingIP: false", "floatingIP: true"),
			want: []string{`plans/shop.yaml:18: spec.target.apiServer.floatingIP: must be false with KamajiControlPlane: there is no control-plane machine to attach a floating IP to; Kamaji exposes the endpoint`},
		},
		{
			name: "kamaji with a fixed IP",
			data: edit(t, kamajiPlan, "      floatingIP: false\n", "      floatingIP: false\n      fixedIP: 10.0.0.10\n"),
			want: []string{`plans/shop.yaml:19: spec.target.apiServer.fixedIP: must be empty with KamajiControlPlane: Kamaji sets the API server address from the endpoint it creates, got "10.0.0.10"`},
		},
		{
			name: "kamaji with host names first",
			data: edit(t, kamajiPlan, "[InternalIP, ExternalIP, Hostname]", "[Hostname, InternalIP]"),
			want: []string{`plans/shop.yaml:35: spec.target.controlPlane.kubelet.preferredAddressTypes: must be [InternalIP, ExternalIP, Hostname] with KamajiControlPlane: the hosted API server cannot resolve node host names, so it must reach kubelets by IP first; got [Hostname, InternalIP]`},
		},
		{
			name: "kamaji with machines",
			data: edit(t, kamajiPlan, "      provider: KamajiControlPlane\n", "      provider: KamajiControlPlane\n      flavor: m1.medium\n"),
			want: []string{`plans/shop.yaml:34: spec.target.controlPlane.flavor: must be empty with KamajiControlPlane: its control plane runs as pods in the management cluster, not on machines`},
		},
		{
			name: "kamaji CCM on control-plane nodes",
			data: edit(t, kamajiPlan, "      tolerations:\n", "      nodeSelector:\n        node-role.kubernetes.io/control-plane: \"\"\n      tolerations:\n"),
			want: []string{`plans/shop.yaml:45: spec.manifests.cloudControllerManager.nodeSelector.node-role.kubernetes.io/control-plane: must not be set with KamajiControlPlane: there are no control-plane nodes, so the cloud controller manager would never be scheduled`},
		},
		{
			name: "kamaji CCM does not tolerate uninitialized workers",
			data: edit(t, kamajiPlan, "key: node.cluster.x-k8s.io/uninitialized", "key: node.cloudprovider.kubernetes.io/uninitialized"),
			want: []string{`plans/shop.yaml:44: spec.manifests.cloudControllerManager.tolerations: must tolerate node.cluster.x-k8s.io/uninitialized (effect NoSchedule) with KamajiControlPlane: the cloud controller manager runs on the workers and is what removes that taint from them`},
		},

		// Calico.
		{
			name: "calico without BGP",
			data: edit(t, kamajiPlan, "protocol: tcp", "protocol: udp"),
			want: []string{`plans/shop.yaml:21: spec.target.securityGroups.allNodesRules: cni is calico: add an ingress rule for BGP (protocol tcp, ports 179-179, remoteManagedGroups [worker]); without it nodes cannot exchange pod routes`},
		},
		{
			name: "calico without IP-in-IP",
			data: edit(t, kamajiPlan, `protocol: "4"`, `protocol: "94"`),
			want: []string{`plans/shop.yaml:21: spec.target.securityGroups.allNodesRules: cni is calico: add an ingress rule for IP-in-IP (protocol "4", remoteManagedGroups [worker]); without it pod traffic between nodes is dropped`},
		},
		{
			name: "calico rules that admit other clusters only",
			data: edit(t, kamajiPlan, "          portRangeMax: 179\n          remoteManagedGroups: [worker]", "          portRangeMax: 179\n          remoteManagedGroups: [bastion]"),
			want: []string{`plans/shop.yaml:21: spec.target.securityGroups.allNodesRules: cni is calico: add an ingress rule for BGP (protocol tcp, ports 179-179, remoteManagedGroups [worker]); without it nodes cannot exchange pod routes`},
		},
		{
			name: "calico with all in-cluster traffic allowed needs no rules",
			data: edit(t, kamajiPlan, "      allNodesRules:\n", "      allowAllInClusterTraffic: true\n      allNodesRules:\n", "protocol: tcp", "protocol: udp"),
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decodeErrors(t, tt.data)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("Decode errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// One pass reports every problem, in line order, whether the decoder or a
// semantic rule found it, so that a plan needs one round of fixes.
func TestDecodeReportsAllProblemsInLineOrder(t *testing.T) {
	data := edit(t, replacePlan,
		"  name: shop\nspec:", "  name: Shop\nspec:",
		"network: {name: tenants-net}", "network: {name: tenants-net, id: 6c1f3a52}",
		"replicas: 2", "replicas: two",
		"- name: md-1", "- name: md-0",
		"replicas: 1", "replicas: -2",
		"drainTimeout: 15m", "drainTimeout: soon",
		"approve: prepare", "approve: rollout",
	)
	want := []string{
		`plans/shop.yaml:4: metadata.name: "Shop" is not a valid Kubernetes name: expected lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters`,
		`plans/shop.yaml:16: spec.target.network: set name or id, not both`,
		`plans/shop.yaml:27: spec.target.workers[0].replicas: expected an integer, got the string "two"`,
		`plans/shop.yaml:28: spec.target.workers[1].name: duplicate worker pool "md-0"; first at spec.target.workers[0]`,
		`plans/shop.yaml:31: spec.target.workers[1].replicas: must be >= 1, got -2`,
		`plans/shop.yaml:33: spec.cutover.drainTimeout: expected a duration like 90s, 10m or 1h30m, got "soon"`,
		`plans/shop.yaml:35: spec.approve: "rollout" is not a phase of strategy replace; expected one of prepare, infrastructure, workers, cutover, cleanup`,
	}
	got := decodeErrors(t, data)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Decode errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A problem the decoder reports is not repeated by a semantic rule about
// the same field or one inside it.
func TestDecodeDoesNotRepeatProblems(t *testing.T) {
	data := edit(t, kamajiPlan, "loadBalancer: false", "loadBalancer: maybe")
	want := []string{`plans/shop.yaml:17: spec.target.apiServer.loadBalancer: expected true or false, got the string "maybe"`}
	if got := decodeErrors(t, data); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Decode errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDecodeTooLarge(t *testing.T) {
	data := replacePlan + "# " + strings.Repeat("x", MaxSize) + "\n"
	want := []string{fmt.Sprintf("plans/shop.yaml: file is %d bytes; a plan may be at most 1048576", len(data))}
	if got := decodeErrors(t, data); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Decode errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestFileLine(t *testing.T) {
	f, err := Decode(testFile, []byte(replacePlan))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		field string
		want  int
	}{
		{"metadata.name", 4},
		{"spec.target.workers[1]", 28},
		{"spec.target.workers[1].replicas", 31},
		// Defaulted fields are not in the file: the closest parent is.
		{"spec.target.workers[1].failureDomain", 28},
		{"spec.timeouts.wait", 5},
		{"nothing", 0},
	}
	for _, tt := range tests {
		if got := f.Line(tt.field); got != tt.want {
			t.Errorf("Line(%q) = %d, want %d", tt.field, got, tt.want)
		}
	}
}
