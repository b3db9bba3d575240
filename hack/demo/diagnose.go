package main

import (
	"context"
	"fmt"
	"strings"

	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/bootstrap/kubeadm/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/controlplane/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// capiState is a short account of the Cluster API objects of the
// scenario's namespace, for the error of a run that did not finish: what
// each KubeadmControlPlane and Machine says of itself, and their false
// conditions, and each KubeadmConfig that has no bootstrap data yet, so
// that a CI log shows why a wait did not end.
func (w *world) capiState(ctx context.Context) string {
	var parts []string
	var kcps controlplanev1.KubeadmControlPlaneList
	if err := w.fx.cloud.Mgmt.Client.List(ctx, &kcps, client.InNamespace("default")); err != nil {
		return "list KubeadmControlPlanes: " + err.Error()
	}
	for _, k := range kcps.Items {
		s := k.Status
		parts = append(parts, fmt.Sprintf("KubeadmControlPlane %s: paused=%t replicas %d ready %d updated %d unavailable %d initialized %t%s",
			k.Name, k.Annotations[clusterv1.PausedAnnotation] != "", s.Replicas, s.ReadyReplicas, s.UpdatedReplicas, s.UnavailableReplicas, s.Initialized, falseConditions(s.Conditions)))
	}
	var machines clusterv1.MachineList
	if err := w.fx.cloud.Mgmt.Client.List(ctx, &machines, client.InNamespace("default")); err != nil {
		return strings.Join(append(parts, "list Machines: "+err.Error()), "; ")
	}
	for _, m := range machines.Items {
		node := "none"
		if m.Status.NodeRef != nil {
			node = m.Status.NodeRef.Name
		}
		parts = append(parts, fmt.Sprintf("Machine %s: phase %s nodeRef %s paused=%t%s",
			m.Name, m.Status.Phase, node, m.Annotations[clusterv1.PausedAnnotation] != "", falseConditions(m.Status.Conditions)))
	}
	var configs bootstrapv1.KubeadmConfigList
	if err := w.fx.cloud.Mgmt.Client.List(ctx, &configs, client.InNamespace("default")); err != nil {
		return strings.Join(append(parts, "list KubeadmConfigs: "+err.Error()), "; ")
	}
	for _, c := range configs.Items {
		if !c.Status.Ready {
			parts = append(parts, fmt.Sprintf("KubeadmConfig %s: no bootstrap data%s", c.Name, falseConditions(c.Status.Conditions)))
		}
	}
	return strings.Join(parts, "; ")
}

// falseConditions lists the conditions that are not True, with their
// reasons.
func falseConditions(cs clusterv1.Conditions) string {
	var out []string
	for _, c := range cs {
		if c.Status != "True" {
			out = append(out, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return " not ready: " + strings.Join(out, ", ")
}
