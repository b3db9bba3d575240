package openstack

import (
	"context"
	"fmt"
	"maps"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	infrav1alpha1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1alpha1"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/executor"
	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/observed"
	osclient "github.com/ferry-dev/ferry/internal/openstack"
	"github.com/ferry-dev/ferry/internal/step"
)

// bindServer records a running server in the OpenStackServer that CAPO's
// OpenStackMachine of the node looks for, as CAPO would have recorded it
// had it built the server: the instance ID, the image, flavor and ports
// it runs with. Without it, CAPO looks the server up by name and, before
// that, creates a port <name>-0 that nothing ever attaches; with the
// instance ID it finds the server by ID, adopts its ports and never
// creates a server in its place.
//
// The OpenStackServer is created paused, owned by the OpenStackMachine,
// its status written through the status subresource, and then unpaused:
// CAPO must not reconcile it before its status says what it is. Each of
// the three writes is skipped when already done.
func (e *Executor) bindServer(ctx context.Context, cloud CloudOps, ev *events.StepEvent) (events.Report, error) {
	s := ev.Step
	ns, name := ev.Inputs.Cluster.Namespace, s.Target.Name
	target := "OpenStackServer " + ns + "/" + name
	providerID := s.Params.Get(step.ParamProviderID)
	id := strings.TrimPrefix(providerID, step.ProviderIDPrefix)
	if id == "" || id == providerID {
		return events.Report{}, failure.Terminal(fmt.Errorf("bind %s: providerID %q is not %s<server-id>", target, providerID, step.ProviderIDPrefix))
	}
	var osm infrav1.OpenStackMachine
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &osm); err != nil {
		// It is created a group earlier; a later attempt finds it.
		return events.Report{}, fmt.Errorf("bind %s: read its OpenStackMachine: %w", target, err)
	}
	// The server is read from the cloud once, and only when an
	// OpenStackServer is to be created or its status written.
	var b *osclient.ServerBinding
	binding := func() (*osclient.ServerBinding, error) {
		if b != nil {
			return b, nil
		}
		var err error
		if b, err = cloud.ServerBinding(ctx, id); err != nil {
			return nil, fmt.Errorf("bind %s: %w", target, err)
		}
		return b, nil
	}
	oss, err := e.ensureServer(ctx, &osm, binding, ev.Plan, target)
	if err != nil {
		return events.Report{}, err
	}
	if got := ptr.Deref(oss.Status.InstanceID, ""); got != "" && got != id {
		return events.Report{}, failure.Terminal(fmt.Errorf("bind %s: it is bound to server %s, not %s", target, got, id))
	}
	if oss.Status.InstanceID == nil {
		b, err := binding()
		if err != nil {
			return events.Report{}, err
		}
		oss.Status = openStackServerStatus(b)
		if err := e.Client.Status().Update(ctx, oss, client.FieldOwner(executor.FieldManager)); err != nil {
			return events.Report{}, executor.WriteError("bind "+target+": record the server", err)
		}
	}
	if oss.Annotations[observed.AnnotationPausedBy] == ev.Plan {
		patch := client.MergeFrom(oss.DeepCopy())
		delete(oss.Annotations, clusterv1.PausedAnnotation)
		delete(oss.Annotations, observed.AnnotationPausedBy)
		if err := e.Client.Patch(ctx, oss, patch, client.FieldOwner(executor.FieldManager)); err != nil {
			return events.Report{}, executor.WriteError("bind "+target+": unpause", err)
		}
	}
	return events.Report{Message: fmt.Sprintf("%s is bound to server %s", target, id)}, nil
}

// ensureServer reads the OpenStackServer of an OpenStackMachine, creating
// it (paused, from the server's binding) when absent.
func (e *Executor) ensureServer(ctx context.Context, osm *infrav1.OpenStackMachine, binding func() (*osclient.ServerBinding, error), plan, target string) (*infrav1alpha1.OpenStackServer, error) {
	oss := &infrav1alpha1.OpenStackServer{}
	err := e.Client.Get(ctx, client.ObjectKeyFromObject(osm), oss)
	switch {
	case apierrors.IsNotFound(err):
		b, err := binding()
		if err != nil {
			return nil, err
		}
		*oss = buildOpenStackServer(osm, b, plan)
		if err := e.Client.Create(ctx, oss, client.FieldOwner(executor.FieldManager)); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, executor.WriteError("bind "+target+": create", err)
		}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(oss), oss); err != nil {
			return nil, fmt.Errorf("bind %s: %w", target, err)
		}
	case err != nil:
		return nil, fmt.Errorf("bind %s: %w", target, err)
	}
	return oss, nil
}

// buildOpenStackServer is the OpenStackServer of an adopted server, paused
// by plan: the OpenStackMachine's identity, and the image, flavor and
// networks the server runs with.
func buildOpenStackServer(osm *infrav1.OpenStackMachine, b *osclient.ServerBinding, plan string) infrav1alpha1.OpenStackServer {
	oss := infrav1alpha1.OpenStackServer{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: osm.Namespace, Name: osm.Name,
			Labels: maps.Clone(osm.Labels),
			Annotations: map[string]string{
				clusterv1.PausedAnnotation: "", observed.AnnotationPausedBy: plan,
				observed.AnnotationAdopted: plan,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: infrav1.SchemeGroupVersion.String(), Kind: step.OpenStackMachine,
				Name: osm.Name, UID: osm.UID,
			}},
		},
		Spec: infrav1alpha1.OpenStackServerSpec{
			IdentityRef: ptr.Deref(osm.Spec.IdentityRef, infrav1.OpenStackIdentityReference{}),
			Image:       osm.Spec.Image,
			Flavor:      osm.Spec.Flavor,
			SSHKeyName:  osm.Spec.SSHKeyName,
		},
	}
	if b.ImageID != "" {
		oss.Spec.Image = infrav1.ImageParam{ID: ptr.To(b.ImageID)}
	}
	if b.FlavorID != "" {
		oss.Spec.Flavor, oss.Spec.FlavorID = nil, ptr.To(b.FlavorID)
	}
	for _, p := range b.Ports {
		oss.Spec.Ports = append(oss.Spec.Ports, infrav1.PortOpts{Network: &infrav1.NetworkParam{ID: ptr.To(p.NetworkID)}})
	}
	return oss
}

// openStackServerStatus is what CAPO records of a server once it resolved
// its spec and built it: the instance, and the ports by ID, so that CAPO
// adopts them instead of creating its own. Ready is left to CAPO, which
// sets it with the instance's state.
func openStackServerStatus(b *osclient.ServerBinding) infrav1alpha1.OpenStackServerStatus {
	st := infrav1alpha1.OpenStackServerStatus{
		InstanceID: ptr.To(b.ID),
		Resolved:   &infrav1alpha1.ResolvedServerSpec{ImageID: b.ImageID, FlavorID: b.FlavorID},
		Resources:  &infrav1alpha1.ServerResources{},
	}
	for _, p := range b.Ports {
		st.Resolved.Ports = append(st.Resolved.Ports, infrav1.ResolvedPortSpec{Name: p.Name, NetworkID: p.NetworkID})
		st.Resources.Ports = append(st.Resources.Ports, infrav1.PortStatus{ID: p.ID})
	}
	return st
}
