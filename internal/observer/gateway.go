package observer

import (
	"context"
	"fmt"
	"slices"
	"strings"

	infrav1alpha1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/observed"
)

// gateways reads the plan's gateway OpenStackServers: those labelled
// with the plan (observed.LabelPlan), which ferry created and may delete,
// and the one with the name the gateway has now, whoever made it, so that
// the planner never takes over or deletes a user's. A gateway carries no
// cluster-name label (its lifecycle is not the cluster's), so it is
// selected by label, not by the cluster index.
func (o *Observer) gateways(ctx context.Context, p *v1alpha1.MigrationPlan, s *observed.Snapshot) error {
	ns := p.Spec.Cluster.Namespace
	var list infrav1alpha1.OpenStackServerList
	if err := o.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{observed.LabelPlan: p.Metadata.Name},
		client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list OpenStackServers of plan %s in %s: %w", p.Metadata.Name, ns, err)
	}
	s.Gateways = nil
	for i := range list.Items {
		s.Gateways = append(s.Gateways, gatewayOf(&list.Items[i]))
	}
	if r := p.Spec.Replace; r != nil && r.Gateway != nil && s.Gateway(r.Gateway.ServerName()) == nil {
		var oss infrav1alpha1.OpenStackServer
		found, err := o.get(ctx, ns, r.Gateway.ServerName(), &oss)
		if err != nil {
			return err
		}
		if found {
			s.Gateways = append(s.Gateways, gatewayOf(&oss))
		}
	}
	slices.SortFunc(s.Gateways, func(a, b observed.OpenStackServer) int { return strings.Compare(a.Name, b.Name) })
	return nil
}

// gatewayOf is what the planner needs of an OpenStackServer.
func gatewayOf(oss *infrav1alpha1.OpenStackServer) observed.OpenStackServer {
	g := observed.OpenStackServer{
		Name:     oss.Name,
		Plan:     oss.Labels[observed.LabelPlan],
		Gateway:  oss.Labels[observed.LabelGateway],
		Ready:    oss.Status.Ready,
		Deleting: oss.DeletionTimestamp != nil,
	}
	if oss.Spec.Flavor != nil {
		g.Flavor = *oss.Spec.Flavor
	}
	if f := oss.Spec.Image.Filter; f != nil && f.Name != nil {
		g.Image = *f.Name
	}
	if oss.Status.InstanceID != nil {
		g.InstanceID = *oss.Status.InstanceID
	}
	return g
}
