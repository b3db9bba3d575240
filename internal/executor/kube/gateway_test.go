package kube_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	infrav1alpha1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1alpha1"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestGatewaySteps runs the gateway's create and delete steps against a
// real API server without CAPO: the OpenStackServer ferry builds (spec and
// labels), a create that finds a user's object of the name, and a delete
// of one ferry did not label. CAPO's part is TestGatewayOpenStack's.
func TestGatewaySteps(t *testing.T) {
	k := testenv.StartKube(t)
	e := newExecutor(t, k)
	ctx := context.Background()
	params := step.NewParams(step.ParamGateway, "vpn", step.ParamFlavor, "m1.small", step.ParamImage, "openvpn",
		step.ParamNetwork, step.Resource(false, "dmz"), step.ParamSecurityGroups, "vpn-udp,ssh",
		step.ParamSSHKeyName, "capi-key", step.ParamIdentityRef, step.IdentityRef("c-cloud", "openstack"))

	for attempt := 1; attempt <= 2; attempt++ {
		if _, err := e.Execute(ctx, event(step.Create, step.OpenStackServer, "vpn-1", params)); err != nil {
			t.Fatalf("create, attempt %d: %v", attempt, err)
		}
	}
	var oss infrav1alpha1.OpenStackServer
	testenv.MustGet(t, k.Client, namespace, "vpn-1", &oss)
	testenv.Expect(t, "labels", oss.Labels, map[string]string{observed.LabelPlan: planName, observed.LabelGateway: "vpn"})
	testenv.Expect(t, "spec", oss.Spec, infrav1alpha1.OpenStackServerSpec{
		Flavor:      ptr.To("m1.small"),
		Image:       infrav1.ImageParam{Filter: &infrav1.ImageFilter{Name: ptr.To("openvpn")}},
		IdentityRef: infrav1.OpenStackIdentityReference{Name: "c-cloud", CloudName: "openstack"},
		SSHKeyName:  "capi-key",
		Ports: []infrav1.PortOpts{{Network: &infrav1.NetworkParam{Filter: &infrav1.NetworkFilter{Name: "dmz"}},
			SecurityGroups: []infrav1.SecurityGroupParam{{Filter: &infrav1.SecurityGroupFilter{Name: "vpn-udp"}}, {Filter: &infrav1.SecurityGroupFilter{Name: "ssh"}}}}},
	})

	user := &infrav1alpha1.OpenStackServer{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "vpn-2"}, Spec: oss.Spec}
	mustCreate(t, k.Client, user)
	for _, action := range []step.Action{step.Create, step.Delete} {
		_, err := e.Execute(ctx, event(action, step.OpenStackServer, "vpn-2", params))
		if err == nil || !failure.IsTerminal(err) || !strings.Contains(err.Error(), observed.LabelPlan) {
			t.Errorf("%s of a user's OpenStackServer: %v; want a terminal error naming the label", action, err)
		}
	}
	var kept infrav1alpha1.OpenStackServer
	testenv.MustGet(t, k.Client, namespace, "vpn-2", &kept)
	testenv.Expect(t, "user's OpenStackServer untouched", kept.Labels == nil && kept.DeletionTimestamp == nil, true)

	// No CAPO here: no finalizer, so the delete ends at once.
	for attempt := 1; attempt <= 2; attempt++ {
		if _, err := e.Execute(ctx, event(step.Delete, step.OpenStackServer, "vpn-1", step.NewParams(step.ParamTimeout, "30s"))); err != nil {
			t.Fatalf("delete, attempt %d: %v", attempt, err)
		}
	}
	if err := k.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "vpn-1"}, &infrav1alpha1.OpenStackServer{}); !apierrors.IsNotFound(err) {
		t.Errorf("vpn-1 after delete: %v", err)
	}
}
