package testenv

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestStartManagers starts the four real managers against one API server:
// CAPI's defaulting webhook fills a MachineDeployment's strategy, CAPO's
// validating webhook refuses an OpenStackMachine without a flavor, and
// each manager logs to its own file.
func TestStartManagers(t *testing.T) {
	k := StartKube(t)
	ms := StartManagers(t, k)
	ctx := context.Background()

	md := &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "md"},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: "c",
			Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
				ClusterName:       "c",
				Bootstrap:         clusterv1.Bootstrap{DataSecretName: new("data")},
				InfrastructureRef: corev1.ObjectReference{APIVersion: "infrastructure.cluster.x-k8s.io/v1beta1", Kind: "OpenStackMachineTemplate", Name: "t"},
			}},
		},
	}
	if err := k.Client.Create(ctx, md); err != nil {
		t.Fatalf("create MachineDeployment: %v", err)
	}
	var got clusterv1.MachineDeployment
	if err := k.Client.Get(ctx, client.ObjectKeyFromObject(md), &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Strategy == nil || got.Spec.Template.Spec.InfrastructureRef.Namespace != "default" {
		t.Errorf("the defaulting webhook did not run: strategy %v, infrastructureRef namespace %q", got.Spec.Strategy, got.Spec.Template.Spec.InfrastructureRef.Namespace)
	}
	for _, m := range AllManagers {
		data, err := os.ReadFile(ms.LogFile(m.Name))
		if err != nil || !strings.Contains(string(data), "Starting") {
			t.Errorf("%s's log %s: %v, %d bytes without \"Starting\"", m.Name, ms.LogFile(m.Name), err, len(data))
		}
	}
}
