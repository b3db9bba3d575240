package testenv

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestControllerStandIns(t *testing.T) {
	k := StartKube(t)
	StartControllerStandIns(t, k, 50*time.Millisecond)
	ctx := context.Background()
	osc := &infrav1.OpenStackCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c1"},
		Spec: infrav1.OpenStackClusterSpec{IdentityRef: infrav1.OpenStackIdentityReference{Name: "c1-cloud-config", CloudName: "openstack"}}}
	pausedOSC := osc.DeepCopy()
	pausedOSC.Name, pausedOSC.Annotations = "c2", map[string]string{clusterv1.PausedAnnotation: ""}
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c1-md-0"},
		Spec: clusterv1.MachineDeploymentSpec{ClusterName: "c1", Replicas: ptr.To[int32](2),
			Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{ClusterName: "c1",
				Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("x")},
				InfrastructureRef: corev1.ObjectReference{Kind: "OpenStackMachineTemplate", Name: "c1-md-0"}}}}}
	for _, o := range []client.Object{osc, pausedOSC, md} {
		if err := k.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		_ = k.Client.Get(ctx, client.ObjectKeyFromObject(osc), osc)
		_ = k.Client.Get(ctx, client.ObjectKeyFromObject(md), md)
		if osc.Status.Ready && md.Status.ReadyReplicas == 2 && md.Status.ObservedGeneration == md.Generation {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !osc.Status.Ready || md.Status.ReadyReplicas != 2 || md.Status.UpdatedReplicas != 2 || md.Status.ObservedGeneration != md.Generation {
		t.Errorf("stand-ins did not move status: osc ready %t, md %+v", osc.Status.Ready, md.Status)
	}
	_ = k.Client.Get(ctx, client.ObjectKeyFromObject(pausedOSC), pausedOSC)
	if pausedOSC.Status.Ready {
		t.Error("a paused OpenStackCluster became ready")
	}
}
