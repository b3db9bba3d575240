package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/kube"
)

// worldLines is what a migration changes in a world, one normalised line
// per resource (a Node has two), sorted: the cloud project's servers,
// ports, floating IPs, security groups and keypairs; the CAPI and CAPO
// objects in namespace default; the Secrets of secretNamespaces; and the
// workload cluster's Nodes and its kube-system objects (workloadKinds).
type worldLines struct {
	lines []string
	// repeated are the cloud's names that more than one resource of a
	// kind carries.
	repeated []string
	// secrets are the Secrets read, whose values the secret scan looks
	// for.
	secrets []corev1.Secret
	// normalize writes what differs between fixtures (IDs, addresses, the
	// fixture's suffix, the endpoint's port) as names, for other lines.
	normalize func(string) string
}

// workloadKind is a kind of the workload cluster's objects that the world
// lines hold: in namespace, or cluster-wide when namespace is empty, and
// then only the objects whose name contains named.
type workloadKind struct {
	gvk              schema.GroupVersionKind
	namespace, named string
}

// ccmName is in the names of what a cloud controller manager manifest
// creates (openstack-cloud-controller-manager,
// system:cloud-controller-manager).
const ccmName = "cloud-controller-manager"

// workloadKinds are what kubeadm leaves in kube-system (the kube-proxy
// DaemonSet, the CoreDNS Deployment, the kubeadm-config and coredns
// ConfigMaps) and what a cloud controller manager manifest creates
// (testenv.CCMManifest: a DaemonSet; upstream's also a ServiceAccount, a
// ConfigMap and cluster-wide RBAC naming it). TestWorkloadKindsCoverCCM
// keeps this list in step with the manifest.
var workloadKinds = []workloadKind{
	{gvk: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}, namespace: "kube-system"},
	{gvk: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, namespace: "kube-system"},
	{gvk: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, namespace: "kube-system"},
	{gvk: schema.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}, namespace: "kube-system"},
	{gvk: schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, named: ccmName},
	{gvk: schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}, named: ccmName},
}

// readWorld reads w's world lines. digests is for comparing a world with
// itself, not two fixtures, whose keys, certificates and marks differ: it
// adds a digest of each Secret's and ConfigMap's data, which says whether
// a value changed without printing it, the annotations of each Secret and
// Node, and the ferry.dev/ annotations of every object (ferry's marks:
// one left behind shows).
func readWorld(ctx context.Context, w *world, digests bool) (*worldLines, error) {
	cloud, err := w.fx.cloud.State(ctx, w.r)
	if err != nil {
		return nil, err
	}
	wl := &worldLines{repeated: cloud.Repeated, normalize: worldNormalizer(cloud.Normalize, w.fx.normalize)}
	add := func(lines ...string) {
		for _, l := range lines {
			wl.lines = append(wl.lines, wl.normalize(l))
		}
	}
	add(cloud.Lines...)

	mgmt := w.fx.cloud.Mgmt.Client
	for _, gvk := range worldKinds {
		items, err := listObjects(ctx, mgmt, gvk, client.InNamespace("default"))
		if err != nil {
			return nil, err
		}
		for _, o := range items {
			line, err := objectLine(gvk.Kind+" "+o.GetName(), o, digests)
			if err != nil {
				return nil, err
			}
			add(line)
		}
	}
	for _, ns := range secretNamespaces {
		list := &corev1.SecretList{}
		if err := mgmt.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("list Secrets in %s: %w", ns, err)
		}
		for _, s := range list.Items {
			wl.secrets = append(wl.secrets, s)
			add(secretLine(s, digests))
		}
	}

	workload := w.fx.cloud.Workload.Client
	nodes := &corev1.NodeList{}
	if err := workload.List(ctx, nodes); err != nil {
		return nil, fmt.Errorf("list the workload cluster's Nodes: %w", err)
	}
	for _, n := range nodes.Items {
		add(nodeLines(n)...)
		if digests {
			add(nodeAnnotationsLine(n))
		}
	}
	for _, k := range workloadKinds {
		var opts []client.ListOption
		if k.namespace != "" {
			opts = append(opts, client.InNamespace(k.namespace))
		}
		items, err := listObjects(ctx, workload, k.gvk, opts...)
		if err != nil {
			return nil, fmt.Errorf("the workload cluster: %w", err)
		}
		for _, o := range items {
			if !strings.Contains(o.GetName(), k.named) {
				continue
			}
			name := o.GetName()
			if o.GetNamespace() != "" {
				name = o.GetNamespace() + "/" + name
			}
			line, err := objectLine(k.gvk.Kind+" "+name, o, digests)
			if err != nil {
				return nil, err
			}
			add(line)
		}
	}
	sort.Strings(wl.lines)
	return wl, nil
}

// worldKinds are the kinds of the management cluster's objects in
// namespace default that the world lines hold: the CAPI and CAPO kinds
// (objectKinds) and the KamajiControlPlane, a control plane that was
// there before ferry, which ferry changes (its kubelet's address order)
// and a Cluster comes to own.
var worldKinds = append(slices.Clone(objectKinds), kube.KamajiGVK)

// ferryAnnotations is the prefix of the annotations ferry marks objects
// with (ferry.dev/created-by, ferry.dev/cordoned-by, …).
const ferryAnnotations = "ferry.dev/"

// worldNormalizer is the cloud's normalizer, then the workload API
// server's port (random per run) after the endpoint's address, then the
// fixture's normalizer when it has one.
func worldNormalizer(cloud, fixture func(string) string) func(string) string {
	return func(s string) string {
		s = cloud(s)
		s = endpointPort.ReplaceAllString(s, `<endpoint-ip>:<port>`)
		s = endpointJSON.ReplaceAllString(s, `${1}"<port>"`)
		if fixture != nil {
			s = fixture(s)
		}
		return s
	}
}

// listObjects lists the objects of kind gvk.
func listObjects(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, opts ...client.ListOption) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("list %s: %w", gvk.Kind, err)
	}
	return list.Items, nil
}

// objectLine is "<what>: " and what an object holds, as JSON: its labels,
// owners and every top-level field but its type, metadata and status (a
// spec; a ClusterRole's rules; a ServiceAccount's secrets). A ConfigMap's
// data is written as its keys, and with digests their digest.
func objectLine(what string, o unstructured.Unstructured, digests bool) (string, error) {
	var owners []string
	for _, ref := range o.GetOwnerReferences() {
		owners = append(owners, fmt.Sprintf("%s/%s controller=%t", ref.Kind, ref.Name, ref.Controller != nil && *ref.Controller))
	}
	sort.Strings(owners)
	view := map[string]any{"labels": o.GetLabels(), "owners": owners}
	data := map[string][]byte{}
	for field, v := range o.Object {
		switch field {
		case "apiVersion", "kind", "metadata", "status":
		case "data", "binaryData":
			m, _ := v.(map[string]any)
			for key, value := range m {
				data[key] = fmt.Append(nil, value)
			}
		default:
			view[field] = v
		}
	}
	if len(data) > 0 {
		view["dataKeys"] = slices.Sorted(maps.Keys(data))
		if digests {
			view["dataDigest"] = dataDigest(data)
		}
	}
	if digests {
		marks := map[string]string{}
		for k, v := range o.GetAnnotations() {
			if strings.HasPrefix(k, ferryAnnotations) {
				marks[k] = v
			}
		}
		if len(marks) > 0 {
			view["ferryAnnotations"] = marks
		}
	}
	b, err := json.Marshal(view)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return what + ": " + string(b), nil
}

// secretLine is a Secret's name, type, keys, labels and owners, and with
// digests its annotations and the digest of its data.
func secretLine(s corev1.Secret, digests bool) string {
	var owners []string
	for _, ref := range s.OwnerReferences {
		owners = append(owners, ref.Kind+"/"+ref.Name)
	}
	line := fmt.Sprintf("Secret %s/%s: %s, keys %v, labels %v, owners %v",
		s.Namespace, s.Name, s.Type, slices.Sorted(maps.Keys(s.Data)), s.Labels, owners)
	if digests {
		line += fmt.Sprintf(", annotations %v, data %s", s.Annotations, dataDigest(s.Data))
	}
	return line
}

// nodeLines are a Node's labels, taints and unschedulable flag, and its
// spec.providerID apart ("<none>" when empty): a rollback may leave that
// one set (rollbackAllowed).
func nodeLines(n corev1.Node) []string {
	var taints []string
	for _, t := range n.Spec.Taints {
		taints = append(taints, t.ToString())
	}
	sort.Strings(taints)
	providerID := n.Spec.ProviderID
	if providerID == "" {
		providerID = "<none>"
	}
	return []string{
		fmt.Sprintf("Node %s: labels %v, taints %v, unschedulable %t", n.Name, n.Labels, taints, n.Spec.Unschedulable),
		fmt.Sprintf("Node %s spec.providerID: %s", n.Name, providerID),
	}
}

// nodeAnnotationsLine is a Node's annotations, a line of its own: what
// ferry and the Cluster API controllers mark a Node with
// (ferry.dev/cordoned-by, cluster.x-k8s.io/machine, …) differs apart from
// its labels and taints.
func nodeAnnotationsLine(n corev1.Node) string {
	return fmt.Sprintf("Node %s annotations: %v", n.Name, n.Annotations)
}

// dataDigest is "sha256:" and the first 12 hex digits of the SHA-256 of
// data's keys and values, in key order, each length-prefixed: equal for
// equal data, whatever the map's order, and without a value in it.
func dataDigest(data map[string][]byte) string {
	h := sha256.New()
	for _, key := range slices.Sorted(maps.Keys(data)) {
		for _, b := range [][]byte{[]byte(key), data[key]} {
			_ = binary.Write(h, binary.BigEndian, uint64(len(b)))
			h.Write(b)
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:12]
}
