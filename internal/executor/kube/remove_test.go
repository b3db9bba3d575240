package kube_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/bootstrap/kubeadm/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/controlplane/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// createdByFerry marks an object as ferry's, made in phase workers.
func createdByFerry(obj client.Object) client.Object {
	obj.SetLabels(map[string]string{observed.LabelCreatedBy: cluster, observed.LabelPhase: "workers", clusterv1.ClusterNameLabel: cluster})
	return obj
}

// TestKubeRemove: a rollback's remove takes the finalizers off what
// ferry created and deletes it, so that it is gone without a controller
// acting; it takes the bootstrap data Secret of a KubeadmConfig with it;
// it never removes an object ferry did not create, and a second run finds
// nothing to do.
func TestKubeRemove(t *testing.T) {
	k := testenv.StartKube(t)
	e := newExecutor(t, k)
	ctx := context.Background()
	withFinalizer := func(obj client.Object) client.Object {
		obj.SetFinalizers([]string{clusterv1.MachineFinalizer})
		return obj
	}
	ours := withFinalizer(createdByFerry(testMachine("ours")))
	theirs := withFinalizer(testMachine("theirs"))
	kc := createdByFerry(&bootstrapv1.KubeadmConfig{ObjectMeta: testMeta("kc")})
	mustCreate(t, k.Client, ours, theirs, kc)
	kc.(*bootstrapv1.KubeadmConfig).Status.DataSecretName = ptr.To("kc")
	if err := k.Client.Status().Update(ctx, kc); err != nil {
		t.Fatal(err)
	}
	controller := metav1.NewControllerRef(kc, bootstrapv1.GroupVersion.WithKind("KubeadmConfig"))
	data := &corev1.Secret{ObjectMeta: testMeta("kc"), Data: map[string][]byte{"value": []byte("#cloud-config")}}
	data.OwnerReferences = []metav1.OwnerReference{*controller}
	mustCreate(t, k.Client, data)

	rep, err := e.Execute(ctx, event(step.Remove, step.Machine, "ours", nil))
	if err != nil || !strings.Contains(rep.Message, "finalizers "+clusterv1.MachineFinalizer+" taken off") {
		t.Fatalf("remove Machine ours: %q, %v", rep.Message, err)
	}
	if err := k.Client.Get(ctx, client.ObjectKeyFromObject(ours), &clusterv1.Machine{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Machine ours after remove: %v, want it gone", err)
	}
	if rep, err = e.Execute(ctx, event(step.Remove, step.Machine, "ours", nil)); err != nil || !strings.Contains(rep.Message, "gone already") {
		t.Fatalf("remove Machine ours again: %q, %v; want nothing to do", rep.Message, err)
	}

	_, err = e.Execute(ctx, event(step.Remove, step.Machine, "theirs", nil))
	if !failure.IsTerminal(err) || !strings.Contains(err.Error(), "not created by ferry") {
		t.Fatalf("remove Machine theirs: %v; want a terminal refusal", err)
	}
	var m clusterv1.Machine
	if err := k.Client.Get(ctx, client.ObjectKeyFromObject(theirs), &m); err != nil || m.DeletionTimestamp != nil || len(m.Finalizers) != 1 {
		t.Fatalf("Machine theirs after a refused remove: %v, deleting %v, finalizers %v; want it as it was", err, m.DeletionTimestamp, m.Finalizers)
	}

	if _, err := e.Execute(ctx, event(step.Remove, step.KubeadmConfig, "kc", nil)); err != nil {
		t.Fatalf("remove KubeadmConfig kc: %v", err)
	}
	for _, obj := range []client.Object{&bootstrapv1.KubeadmConfig{}, &corev1.Secret{}} {
		if err := k.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "kc"}, obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T kc after remove: %v, want it gone", obj, err)
		}
	}
}

// TestKubeRelease: a Secret that was there before ferry loses the owner
// references to objects ferry created and the label ferry gave it, and
// keeps its data byte for byte and every other owner.
func TestKubeRelease(t *testing.T) {
	k := testenv.StartKube(t)
	e := newExecutor(t, k)
	ctx := context.Background()
	ferryKCP := createdByFerry(testKCP("ferry-kcp", 1))
	userKCP := testKCP("user-kcp", 1)
	mustCreate(t, k.Client, ferryKCP, userKCP)
	ca := []byte("-----BEGIN CERTIFICATE-----\nkept\n")
	sec := &corev1.Secret{ObjectMeta: testMeta("capi-quickstart-ca", observed.AnnotationLabelledBy, cluster, "keep", "me"),
		Type: clusterv1.ClusterSecretType, Data: map[string][]byte{"tls.crt": ca}}
	sec.Labels = map[string]string{clusterv1.ClusterNameLabel: cluster, "team": "a"}
	kcpKind := controlplanev1.GroupVersion.WithKind("KubeadmControlPlane")
	sec.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(ferryKCP, kcpKind)}
	userRef := metav1.OwnerReference{APIVersion: kcpKind.GroupVersion().String(), Kind: kcpKind.Kind, Name: userKCP.GetName(), UID: userKCP.GetUID()}
	sec.OwnerReferences = append(sec.OwnerReferences, userRef)
	mustCreate(t, k.Client, sec)

	rep, err := e.Execute(ctx, event(step.Release, step.Secret, "capi-quickstart-ca", nil))
	if err != nil {
		t.Fatalf("release: %v", err)
	}
	t.Log(rep.Message)
	var got corev1.Secret
	if err := k.Client.Get(ctx, client.ObjectKeyFromObject(sec), &got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Data["tls.crt"], ca) || len(got.Data) != 1 {
		t.Errorf("data after release changed")
	}
	if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].Name != "user-kcp" {
		t.Errorf("owners after release: %v, want only user-kcp", got.OwnerReferences)
	}
	if _, ok := got.Labels[clusterv1.ClusterNameLabel]; ok || got.Labels["team"] != "a" {
		t.Errorf("labels after release: %v, want ferry's cluster-name label gone and the others kept", got.Labels)
	}
	if _, ok := got.Annotations[observed.AnnotationLabelledBy]; ok || got.Annotations["keep"] != "me" {
		t.Errorf("annotations after release: %v", got.Annotations)
	}
	if rep, err := e.Execute(ctx, event(step.Release, step.Secret, "capi-quickstart-ca", nil)); err != nil || !strings.Contains(rep.Message, "nothing of ferry's") {
		t.Errorf("release again: %q, %v; want nothing to do", rep.Message, err)
	}
}

// TestKubeRestoreKamaji: the preferredAddressTypes ferry changes on a
// KamajiControlPlane it did not create come back as they were, and a
// second restore finds nothing to do.
func TestKubeRestoreKamaji(t *testing.T) {
	k := testenv.StartKube(t)
	e := newExecutor(t, k)
	ctx := context.Background()
	kcp := testKamaji("kamaji")
	mustCreate(t, k.Client, kcp)
	types := func() []string {
		u := fresh(kcp).(*unstructured.Unstructured)
		if err := k.Client.Get(ctx, client.ObjectKeyFromObject(kcp), u); err != nil {
			t.Fatal(err)
		}
		v, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "kubelet", "preferredAddressTypes")
		return v
	}
	if _, err := e.Execute(ctx, event(step.Patch, step.KamajiControlPlane, "kamaji", map[string]string{step.ParamPreferredAddressTypes: "InternalIP,ExternalIP,Hostname"})); err != nil {
		t.Fatal(err)
	}
	if got := types(); strings.Join(got, ",") != "InternalIP,ExternalIP,Hostname" {
		t.Fatalf("after the patch: %v", got)
	}
	if _, err := e.Execute(ctx, event(step.Restore, step.KamajiControlPlane, "kamaji", nil)); err != nil {
		t.Fatal(err)
	}
	if got := types(); strings.Join(got, ",") != "Hostname,InternalIP" {
		t.Fatalf("after the restore: %v, want Hostname,InternalIP as before ferry", got)
	}
	rep, err := e.Execute(ctx, event(step.Restore, step.KamajiControlPlane, "kamaji", nil))
	if err != nil || !strings.Contains(rep.Message, "nothing of ferry's") {
		t.Fatalf("restore again: %q, %v", rep.Message, err)
	}
}
