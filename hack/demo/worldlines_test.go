package main

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestDataDigest: the digest of a Secret's data is the same whatever the
// map's order, differs when a byte or the split between key and value
// does, and holds no value.
func TestDataDigest(t *testing.T) {
	data := map[string][]byte{"tls.crt": []byte("certificate"), "tls.key": []byte("private-key-bytes")}
	d := dataDigest(data)
	if !strings.HasPrefix(d, "sha256:") || len(d) != len("sha256:")+12 {
		t.Errorf("digest %q: want sha256: and 12 hex digits", d)
	}
	if again := dataDigest(map[string][]byte{"tls.key": []byte("private-key-bytes"), "tls.crt": []byte("certificate")}); again != d {
		t.Errorf("the same data digested %q, then %q", d, again)
	}
	for _, other := range []map[string][]byte{
		{"tls.crt": []byte("certificate"), "tls.key": []byte("private-key-byteS")},
		{"tls.crt": []byte("certificatet"), "ls.key": []byte("private-key-bytes")},
		{"tls.crt": []byte("certificate")},
	} {
		if dataDigest(other) == d {
			t.Errorf("%q digests like %q", other, data)
		}
	}
	s := corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c-ca", Labels: map[string]string{"cluster.x-k8s.io/cluster-name": "c"}},
		Type: "cluster.x-k8s.io/secret", Data: data}
	want := "Secret default/c-ca: cluster.x-k8s.io/secret, keys [tls.crt tls.key], labels map[cluster.x-k8s.io/cluster-name:c], owners []"
	if got := secretLine(s, false); got != want {
		t.Errorf("secretLine:\n got %s\nwant %s", got, want)
	}
	if got := secretLine(s, true); got != want+", annotations map[], data "+d || strings.Contains(got, "private-key") {
		t.Errorf("secretLine with digests: %s", got)
	}
	s.Annotations = map[string]string{"ferry.dev/labelled-by": "c"}
	if got := secretLine(s, true); !strings.Contains(got, ", annotations map[ferry.dev/labelled-by:c], data ") {
		t.Errorf("secretLine with digests of a Secret ferry marked: %s", got)
	}
}

// TestObjectLine: an object's line holds its labels, owners and spec (not
// its metadata or status), as capture compared CAPI objects before; a
// ConfigMap's data is written as its keys and, with digests, a digest.
func TestObjectLine(t *testing.T) {
	m := unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
		"metadata": map[string]any{"name": "m", "labels": map[string]any{"a": "b"}, "resourceVersion": "42",
			"ownerReferences": []any{map[string]any{"apiVersion": "v1", "kind": "MachineSet", "name": "ms", "uid": "u", "controller": true}}},
		"spec":   map[string]any{"clusterName": "c"},
		"status": map[string]any{"phase": "Running"},
	}}
	got, err := objectLine("Machine m", m, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := `Machine m: {"labels":{"a":"b"},"owners":["MachineSet/ms controller=true"],"spec":{"clusterName":"c"}}`; got != want {
		t.Errorf("objectLine:\n got %s\nwant %s", got, want)
	}

	cm := unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "kubeadm-config", "namespace": "kube-system"},
		"data":     map[string]any{"ClusterConfiguration": "controlPlaneEndpoint: 10.0.0.1:6443"}}}
	plain, err := objectLine("ConfigMap kube-system/kubeadm-config", cm, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := `ConfigMap kube-system/kubeadm-config: {"dataKeys":["ClusterConfiguration"],"labels":null,"owners":null}`; plain != want {
		t.Errorf("objectLine:\n got %s\nwant %s", plain, want)
	}
	cm.SetAnnotations(map[string]string{"ferry.dev/created-by": "c", "deployment.kubernetes.io/revision": "1"})
	marked, _ := objectLine("ConfigMap kube-system/kubeadm-config", cm, true)
	if !strings.Contains(marked, `"ferryAnnotations":{"ferry.dev/created-by":"c"}`) || strings.Contains(marked, "revision") {
		t.Errorf("objectLine with digests of an object ferry marked: %s", marked)
	}
	if again, _ := objectLine("ConfigMap kube-system/kubeadm-config", cm, false); again != plain {
		t.Errorf("objectLine without digests shows annotations: %s", again)
	}
	cm.SetAnnotations(nil)
	digested, _ := objectLine("ConfigMap kube-system/kubeadm-config", cm, true)
	cm.Object["data"] = map[string]any{"ClusterConfiguration": "controlPlaneEndpoint: 10.0.0.2:6443"}
	changed, _ := objectLine("ConfigMap kube-system/kubeadm-config", cm, true)
	if !strings.Contains(digested, `"dataDigest":"sha256:`) || digested == changed || strings.Contains(digested, "10.0.0.1") {
		t.Errorf("a changed ConfigMap's lines with digests:\n%s\n%s", digested, changed)
	}
}

// TestNodeLines: a Node's providerID is a line of its own, "<none>" when
// unset; its taints are sorted.
func TestNodeLines(t *testing.T) {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp-0", Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "z", Effect: corev1.TaintEffectNoExecute}, {Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}}}
	want := []string{
		"Node cp-0: labels map[node-role.kubernetes.io/control-plane:], taints [node-role.kubernetes.io/control-plane:NoSchedule z:NoExecute], unschedulable false",
		"Node cp-0 spec.providerID: <none>",
	}
	if got := nodeLines(n); !slices.Equal(got, want) {
		t.Errorf("nodeLines:\n got %q\nwant %q", got, want)
	}
	if got := nodeAnnotationsLine(n); got != "Node cp-0 annotations: map[]" {
		t.Errorf("nodeAnnotationsLine: %q", got)
	}
	n.Annotations = map[string]string{"ferry.dev/cordoned-by": "c", "cluster.x-k8s.io/machine": "m"}
	if got := nodeAnnotationsLine(n); got != "Node cp-0 annotations: map[cluster.x-k8s.io/machine:m ferry.dev/cordoned-by:c]" {
		t.Errorf("nodeAnnotationsLine: %q", got)
	}
	if got := lineCounts(append(nodeLines(n), nodeAnnotationsLine(n))); got != "3 lines (1 objects, 0 servers, 0 Secrets)" {
		t.Errorf("a Node's three lines count as %q", got)
	}
	n.Spec.ProviderID, n.Spec.Unschedulable = "openstack:///1234", true
	if got := nodeLines(n); !strings.HasSuffix(got[0], "unschedulable true") || got[1] != "Node cp-0 spec.providerID: openstack:///1234" {
		t.Errorf("nodeLines: %q", got)
	}
}

// TestWorkloadKindsCoverCCM: every object the cloud controller manager
// manifest creates is of a kind the world lines read, where it is.
func TestWorkloadKindsCoverCCM(t *testing.T) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(testenv.CCMManifest)), 4096)
	n := 0
	for {
		var o unstructured.Unstructured
		if err := dec.Decode(&o.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if o.Object == nil {
			continue
		}
		n++
		covered := slices.ContainsFunc(workloadKinds, func(k workloadKind) bool {
			return k.gvk == o.GroupVersionKind() && k.namespace == o.GetNamespace() && strings.Contains(o.GetName(), k.named)
		})
		if !covered {
			t.Errorf("%s %s/%s of the CCM manifest is not in workloadKinds", o.GetKind(), o.GetNamespace(), o.GetName())
		}
	}
	if n == 0 {
		t.Error("no object in testenv.CCMManifest")
	}
}

// TestWorldNormalizer: the endpoint's port goes after the cloud's
// normalizer, and the fixture's normalizer runs last.
func TestWorldNormalizer(t *testing.T) {
	cloud := func(s string) string { return strings.ReplaceAll(s, "10.9.8.7", "<endpoint-ip>") }
	fixture := func(s string) string { return strings.ReplaceAll(s, "abc123", "<suffix>") }
	norm := worldNormalizer(cloud, fixture)
	got := norm(`Cluster c-abc123: {"controlPlaneEndpoint":{"host":"10.9.8.7","port":35191}} ClusterConfiguration: 10.9.8.7:35191`)
	if want := `Cluster c-<suffix>: {"controlPlaneEndpoint":{"host":"<endpoint-ip>","port":"<port>"}} ClusterConfiguration: <endpoint-ip>:<port>`; got != want {
		t.Errorf("normalized:\n got %s\nwant %s", got, want)
	}
	if got := worldNormalizer(cloud, nil)("abc123"); got != "abc123" {
		t.Errorf("without a fixture normalizer: %q", got)
	}
}
