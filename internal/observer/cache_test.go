package observer

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/bootstrap/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

func TestClusterOf(t *testing.T) {
	meta := func(name string, labels map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels}
	}
	labelled := map[string]string{clusterv1.ClusterNameLabel: "c1"}
	cases := []struct {
		obj  client.Object
		want string
	}{
		{&clusterv1.Cluster{ObjectMeta: meta("c1", nil)}, "c1"},
		{&clusterv1.Machine{ObjectMeta: meta("node-a", nil), Spec: clusterv1.MachineSpec{ClusterName: "c1"}}, "c1"},
		{&clusterv1.MachineDeployment{ObjectMeta: meta("md-0", nil), Spec: clusterv1.MachineDeploymentSpec{ClusterName: "c1"}}, "c1"},
		{&infrav1.OpenStackMachine{ObjectMeta: meta("node-a", labelled)}, "c1"},
		{&infrav1.OpenStackMachine{ObjectMeta: meta("c1-node-a", nil)}, ""},
		{&infrav1.OpenStackCluster{ObjectMeta: meta("c1", nil)}, "c1"},
		{&corev1.Secret{ObjectMeta: meta("c1-ca", nil)}, "c1"},
		{&corev1.Secret{ObjectMeta: meta("my-c1-cloud-config", nil)}, "my-c1"},
		{&corev1.Secret{ObjectMeta: meta("openstack-credentials", nil)}, ""},
		{&corev1.Secret{ObjectMeta: meta("anything", labelled)}, "c1"},
	}
	for _, c := range cases {
		if got := ClusterOf(c.obj); got != c.want {
			t.Errorf("ClusterOf(%T %s) = %q, want %q", c.obj, c.obj.GetName(), got, c.want)
		}
	}
}

// TestObserveCached: through NewCachedClient's index a plan sees what it
// sees through a plain client in a namespace shared by two clusters: its
// own cluster's objects and the unlabelled ones, not the other cluster's;
// and informer events name the cluster they concern.
func TestObserveCached(t *testing.T) {
	k := testenv.StartKube(t)
	ctx := t.Context()
	create := func(obj client.Object) {
		t.Helper()
		if err := k.Client.Create(ctx, obj); err != nil {
			t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
		}
	}
	meta := func(name, cluster string) metav1.ObjectMeta {
		m := metav1.ObjectMeta{Namespace: "default", Name: name}
		if cluster != "" {
			m.Labels = map[string]string{clusterv1.ClusterNameLabel: cluster}
		}
		return m
	}
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "creds"}})
	create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "creds", Name: "os"}, Data: map[string][]byte{"clouds.yaml": []byte(secretValue)}})
	for _, c := range []string{"c1", "c2"} {
		create(&corev1.Secret{ObjectMeta: meta(c+"-ca", ""), Data: map[string][]byte{"tls.crt": []byte(secretValue)}})
		create(&clusterv1.Machine{ObjectMeta: meta(c+"-cp-0", ""), Spec: clusterv1.MachineSpec{ClusterName: c,
			InfrastructureRef: corev1.ObjectReference{Kind: "OpenStackMachine", Name: c + "-cp-0"}}})
		create(&infrav1.OpenStackMachine{ObjectMeta: meta(c+"-cp-0", c), Spec: infrav1.OpenStackMachineSpec{
			Flavor: ptr.To("m1"), Image: infrav1.ImageParam{Filter: &infrav1.ImageFilter{Name: ptr.To("img")}}}})
		create(&bootstrapv1.KubeadmConfig{ObjectMeta: meta(c+"-cp-0", c)})
	}
	create(&bootstrapv1.KubeadmConfig{ObjectMeta: meta("handmade", "")})

	events := make(chan [2]string, 100)
	cached, err := NewCachedClient(ctx, k.Config, func(ns, cluster string) {
		select {
		case events <- [2]string{ns, cluster}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	p := plan(v1alpha1.ProviderKubeadm)
	observe := func(c client.Client) *observed.Snapshot {
		t.Helper()
		s, err := (&Observer{Client: c}).Observe(ctx, p, observed.Record{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	plain, fromCache := observe(k.Client), observe(cached)
	for _, s := range []*observed.Snapshot{plain, fromCache} {
		if len(s.Machines) != 1 || s.Machines[0].Name != "c1-cp-0" {
			t.Errorf("machines = %+v, want c1-cp-0 only", s.Machines)
		}
		if !slices.Equal(s.OpenStackMachines, []string{"c1-cp-0"}) || !slices.Equal(s.KubeadmConfigs, []string{"c1-cp-0", "handmade"}) {
			t.Errorf("OpenStackMachines %v, KubeadmConfigs %v; want c1's and the unlabelled one", s.OpenStackMachines, s.KubeadmConfigs)
		}
		if s.Secret("default", "c1-ca") == nil || s.Secret("default", "c2-ca") != nil || !s.HasSecretKey("creds", "os", "clouds.yaml") {
			t.Errorf("secrets = %+v; want c1-ca and creds/os", s.Secrets)
		}
	}

	// No object of cluster c3 existed: its event is the new Machine's.
	create(&clusterv1.Machine{ObjectMeta: meta("c3-md-0-x", ""), Spec: clusterv1.MachineSpec{ClusterName: "c3",
		InfrastructureRef: corev1.ObjectReference{Kind: "OpenStackMachine", Name: "c3-md-0-x"}}})
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev == [2]string{"default", "c3"} {
				return
			}
		case <-timeout:
			t.Fatal("no event naming cluster c3 for its new Machine")
		}
	}
}
