package observer

import (
	"context"
	"slices"
	"testing"
	"testing/fstest"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestObserveCreated: the snapshot tells what ferry created for the plan
// (by its labels, with the phase that made it) from what it did not, the
// owners and ferry's label of the Secrets that were there before, and
// whether a manifest object is one ferry's apply created: what a
// rollback needs.
func TestObserveCreated(t *testing.T) {
	k := testenv.StartKube(t)
	ctx := context.Background()
	ours := func(phase string) map[string]string {
		return map[string]string{observed.LabelCreatedBy: "c1", observed.LabelPhase: phase, clusterv1.ClusterNameLabel: "c1"}
	}
	machine := func(name string, labels map[string]string) *clusterv1.Machine {
		return &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels},
			Spec: clusterv1.MachineSpec{ClusterName: "c1", InfrastructureRef: corev1.ObjectReference{Kind: "OpenStackMachine", Name: name}}}
	}
	other := ours("workers")
	other[observed.LabelCreatedBy] = "another-plan"
	for _, obj := range []client.Object{
		machine("c1-md-0-a", ours("workers")),
		machine("c1-md-0-b", nil),
		machine("c1-md-0-c", other),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c1-cloud-config", Labels: ours("cluster")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c1-ca",
			Annotations:     map[string]string{observed.AnnotationLabelledBy: "c1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "controlplane.cluster.x-k8s.io/v1beta1", Kind: "KubeadmControlPlane", Name: "c1-control-plane", UID: "1"}}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c1-kubeconfig"}, Data: map[string][]byte{"value": k.Kubeconfig(t)}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "ccm", Annotations: map[string]string{observed.LabelCreatedBy: "c1"}}},
	} {
		if err := k.Client.Create(ctx, obj); err != nil {
			t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
		}
	}
	p := plan(v1alpha1.ProviderKubeadm)
	p.Metadata.Name = "c1"
	o := &Observer{Client: k.Client, Manifests: fstest.MapFS{"ccm.yaml": {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ccm\n  namespace: kube-system\n---\n" +
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ccm-config\n  namespace: kube-system\n")}}}
	s, err := o.Observe(ctx, p, observed.Record{})
	if err != nil {
		t.Fatal(err)
	}
	want := []observed.Created{{Kind: "Machine", Name: "c1-md-0-a", Phase: "workers"}, {Kind: "Secret", Name: "c1-cloud-config", Phase: "cluster"}}
	if !slices.Equal(s.Created, want) {
		t.Errorf("created = %+v, want %+v (not the Machine without ferry's label, nor another plan's)", s.Created, want)
	}
	ca := s.Secret("default", "c1-ca")
	if ca == nil || !ca.LabelledByFerry || !slices.Equal(ca.Owners, []observed.Ref{{Kind: "KubeadmControlPlane", Name: "c1-control-plane"}}) {
		t.Errorf("Secret c1-ca = %+v; want labelled by ferry, owned by the KubeadmControlPlane", ca)
	}
	if m := s.Manifest("ccm.yaml"); m.Applied || !m.Created {
		t.Errorf("manifest = %+v (workload error %q); want not applied (one object missing) but with an object ferry created", m, s.WorkloadError)
	}
}
