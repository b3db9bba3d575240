package kube

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	infrav1alpha1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1alpha1"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
)

// The plan's gateway (seed 002): a CAPO OpenStackServer that ferry labels
// with the plan (observed.LabelPlan) and the gateway's name
// (observed.LabelGateway), and deletes only with those labels. It has no
// cluster-name label: CAPO then reconciles it whether or not the Cluster
// is paused, and its lifecycle is not the cluster's.

// createGateway creates the gateway's OpenStackServer unless it exists.
// One that exists without this plan's label is a user's: the step fails
// for good rather than report a gateway that ferry does not own.
func (e *Executor) createGateway(ctx context.Context, s *job) (events.Report, error) {
	var have infrav1alpha1.OpenStackServer
	err := e.Client.Get(ctx, s.key, &have)
	switch {
	case err == nil && have.Labels[observed.LabelPlan] != s.ev.Plan:
		return events.Report{}, failure.Terminal(fmt.Errorf("create %s: it exists without label %s=%s: ferry did not create it and neither takes it over nor deletes it",
			s.target(), observed.LabelPlan, s.ev.Plan))
	case err != nil && !apierrors.IsNotFound(err):
		return events.Report{}, fmt.Errorf("create %s: check whether it exists: %w", s.target(), err)
	}
	return e.create(ctx, s, e.buildGateway)
}

// buildGateway: the server CAPO builds from the step's flavor, image (by
// name), SSH key, one port on the step's network with its security
// groups, and the identity Secret.
func (e *Executor) buildGateway(_ context.Context, s *job) (client.Object, error) {
	p := s.params()
	gateway, err := required(s, step.ParamGateway)
	if err != nil {
		return nil, err
	}
	flavor, err := required(s, step.ParamFlavor)
	if err != nil {
		return nil, err
	}
	image, err := required(s, step.ParamImage)
	if err != nil {
		return nil, err
	}
	id, err := identity(s)
	if err != nil {
		return nil, err
	}
	byID, network, err := p.Resource(step.ParamNetwork)
	if err != nil {
		return nil, s.paramError(err)
	}
	port := infrav1.PortOpts{Network: &infrav1.NetworkParam{Filter: &infrav1.NetworkFilter{Name: network}}}
	if byID {
		port.Network = &infrav1.NetworkParam{ID: ptr.To(network)}
	}
	for _, g := range p.List(step.ParamSecurityGroups) {
		port.SecurityGroups = append(port.SecurityGroups, infrav1.SecurityGroupParam{Filter: &infrav1.SecurityGroupFilter{Name: g}})
	}
	oss := &infrav1alpha1.OpenStackServer{Spec: infrav1alpha1.OpenStackServerSpec{
		Flavor:      ptr.To(flavor),
		Image:       infrav1.ImageParam{Filter: &infrav1.ImageFilter{Name: ptr.To(image)}},
		IdentityRef: *id,
		SSHKeyName:  p.Get(step.ParamSSHKeyName),
		Ports:       []infrav1.PortOpts{port},
	}}
	oss.SetNamespace(s.key.Namespace)
	oss.SetName(s.key.Name)
	oss.SetLabels(map[string]string{observed.LabelPlan: s.ev.Plan, observed.LabelGateway: gateway})
	return oss, nil
}

// gatewayGonePoll is how often deleteGateway looks whether CAPO has
// deleted the server and removed its finalizer.
const gatewayGonePoll = 2 * time.Second

// deleteGateway deletes a gateway OpenStackServer that ferry created for
// this plan, and waits (for at most the step's timeout) until CAPO has
// deleted its Nova server and the object is gone: a delete step that
// succeeds means the server is gone. One without the plan's label is
// never deleted: the step fails for good.
func (e *Executor) deleteGateway(ctx context.Context, s *job) (events.Report, error) {
	var oss infrav1alpha1.OpenStackServer
	err := e.Client.Get(ctx, s.key, &oss)
	switch {
	case apierrors.IsNotFound(err):
		return events.Report{Message: s.target() + " is already gone"}, nil
	case err != nil:
		return events.Report{}, fmt.Errorf("get %s: %w", s.target(), err)
	case oss.Labels[observed.LabelPlan] != s.ev.Plan:
		return events.Report{}, failure.Terminal(fmt.Errorf("delete %s: it has no label %s=%s: ferry deletes only the gateways it created",
			s.target(), observed.LabelPlan, s.ev.Plan))
	}
	timeout, err := waitTimeout(s)
	if err != nil {
		return events.Report{}, err
	}
	if oss.DeletionTimestamp == nil {
		s.log.Info("deleting", "object", s.target(), "instanceID", ptr.Deref(oss.Status.InstanceID, ""))
		// The UID precondition keeps a delivery that read the object from
		// deleting a namesake created after it.
		err = e.Client.Delete(ctx, &oss, client.Preconditions{UID: &oss.UID})
		if err != nil && !apierrors.IsNotFound(err) {
			return events.Report{}, fmt.Errorf("delete %s: %w", s.target(), err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := e.Client.Get(wctx, s.key, &infrav1alpha1.OpenStackServer{})
		switch {
		case apierrors.IsNotFound(err):
			return events.Report{Message: "deleted " + s.target() + " and its Nova server " + ptr.Deref(oss.Status.InstanceID, "(none yet)")}, nil
		case err != nil && wctx.Err() == nil:
			return events.Report{}, fmt.Errorf("delete %s: read it: %w", s.target(), err)
		}
		select {
		case <-wctx.Done():
			return events.Report{}, fmt.Errorf("delete %s: CAPO has not removed it within %s (its finalizer stays until the Nova server is deleted)", s.target(), timeout)
		case <-time.After(gatewayGonePoll):
		}
	}
}

// serverSeen is what a wait reports of an OpenStackServer.
func serverSeen(o *infrav1alpha1.OpenStackServer) string {
	seen := fmt.Sprintf("status.ready %t", o.Status.Ready)
	if o.Status.InstanceState != nil {
		seen += ", server " + string(*o.Status.InstanceState)
	}
	if o.Status.InstanceID != nil {
		seen += " (" + *o.Status.InstanceID + ")"
	}
	return seen
}
