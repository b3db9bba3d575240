package kube_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/controlplane/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/executor/kube"
	"github.com/ferry-dev/ferry/internal/failure"
	kubeclient "github.com/ferry-dev/ferry/internal/kube"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

func testCluster(name string, paused bool, ann ...string) *clusterv1.Cluster {
	c := &clusterv1.Cluster{ObjectMeta: testMeta(name, ann...), Spec: clusterv1.ClusterSpec{Paused: paused,
		InfrastructureRef: &corev1.ObjectReference{APIVersion: infraAPI, Kind: "DockerCluster", Name: name}}}
	return c
}

func testMD(name, cluster string, ann ...string) *clusterv1.MachineDeployment {
	sel := map[string]string{"pool": name}
	return &clusterv1.MachineDeployment{ObjectMeta: testMeta(name, ann...), Spec: clusterv1.MachineDeploymentSpec{
		ClusterName: cluster, Selector: metav1.LabelSelector{MatchLabels: sel},
		Template: clusterv1.MachineTemplateSpec{ObjectMeta: clusterv1.ObjectMeta{Labels: sel}, Spec: testMachineSpec(cluster)},
	}}
}

func testMachine(name string, ann ...string) *clusterv1.Machine {
	return &clusterv1.Machine{ObjectMeta: testMeta(name, ann...), Spec: testMachineSpec(cluster)}
}

func testMachineSpec(cluster string) clusterv1.MachineSpec {
	return clusterv1.MachineSpec{ClusterName: cluster, Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("data")},
		InfrastructureRef: corev1.ObjectReference{APIVersion: infraAPI, Kind: "DockerMachineTemplate", Name: "old"}}
}

func testKCP(name string, replicas int32, ann ...string) *controlplanev1.KubeadmControlPlane {
	return &controlplanev1.KubeadmControlPlane{ObjectMeta: testMeta(name, ann...), Spec: controlplanev1.KubeadmControlPlaneSpec{
		Replicas: ptr.To(replicas), Version: version,
		MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{
			InfrastructureRef: corev1.ObjectReference{APIVersion: infraAPI, Kind: "DockerMachineTemplate", Name: "old"}},
	}}
}

func testKamaji(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"replicas": int64(1), "version": "1.28.10", "dataStoreName": "default",
		"kubelet": map[string]any{"preferredAddressTypes": []any{"Hostname", "InternalIP"}},
	}}}
	u.SetGroupVersionKind(kubeclient.KamajiGVK)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// testMeta names an object and sets annotations given as key, value.
func testMeta(name string, ann ...string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: map[string]string{}}
	for i := 0; i+1 < len(ann); i += 2 {
		m.Annotations[ann[i]] = ann[i+1]
	}
	return m
}

// Pause annotations as the tests set them: a user's, and ferry's.
var (
	userPause  = []string{clusterv1.PausedAnnotation, ""}
	ferryPause = []string{clusterv1.PausedAnnotation, "true", observed.AnnotationPausedBy, cluster}
)

// fresh returns an empty object of obj's type to read into: reading
// into a used one would keep map entries the server no longer has.
func fresh(obj client.Object) client.Object {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		fresh := &unstructured.Unstructured{}
		fresh.SetGroupVersionKind(u.GroupVersionKind())
		return fresh
	}
	return reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
}

// kindOf is the kind of a typed or unstructured object.
func kindOf(t *testing.T, k *testenv.Kube, obj client.Object) string {
	t.Helper()
	gvk, err := apiutil.GVKForObject(obj, k.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	return gvk.Kind
}

// pauseState reads back whether an object is paused and carries
// ferry's mark.
func pauseState(obj client.Object) (paused, mark bool) {
	_, annotated := obj.GetAnnotations()[clusterv1.PausedAnnotation]
	_, mark = obj.GetAnnotations()[observed.AnnotationPausedBy]
	switch o := obj.(type) {
	case *clusterv1.Cluster:
		return o.Spec.Paused, mark
	case *clusterv1.MachineDeployment:
		return annotated || o.Spec.Paused, mark
	}
	return annotated, mark
}

// run executes a step and checks the error: wantErr "" wants none, else
// a terminal error containing it.
func run(t *testing.T, e *kube.Executor, ev *events.StepEvent, wantErr string) events.Report {
	t.Helper()
	rep, err := e.Execute(context.Background(), ev)
	checkErr(t, ev, err, wantErr)
	return rep
}

// checkErr checks a step's error: wantErr "" wants none, else a
// terminal error containing it.
func checkErr(t *testing.T, ev *events.StepEvent, err error, wantErr string) {
	t.Helper()
	switch {
	case wantErr == "" && err != nil:
		t.Fatalf("%s %s: %v", ev.Step.Action, ev.Step.Target, err)
	case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr) || !failure.IsTerminal(err)):
		t.Fatalf("%s %s: error %v (terminal %t); want a terminal error with %q", ev.Step.Action, ev.Step.Target, err, failure.IsTerminal(err), wantErr)
	}
}
