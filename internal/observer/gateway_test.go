package observer

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	infrav1alpha1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1alpha1"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestObserveGateways reads the plan's gateway OpenStackServers from a
// real API server, directly and through the informer cache: those
// labelled for the plan and the one with the gateway's name, not another
// plan's nor a user's of another name.
func TestObserveGateways(t *testing.T) {
	k := testenv.StartKube(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := &v1alpha1.MigrationPlan{Metadata: v1alpha1.Metadata{Name: "p1"}, Spec: v1alpha1.Spec{
		Cluster:  v1alpha1.ClusterRef{Name: "c1", Namespace: "default"},
		Strategy: v1alpha1.StrategyReplace,
		Replace:  &v1alpha1.ReplaceOptions{Gateway: &v1alpha1.Gateway{Name: "vpn", Flavor: "m1.small", Image: "img"}},
		Target:   v1alpha1.Target{ControlPlane: v1alpha1.ControlPlane{Provider: v1alpha1.ProviderKamaji}},
	}}
	v1alpha1.Default(p)
	want := p.Spec.Replace.Gateway.ServerName()
	server := func(name string, labels map[string]string) {
		t.Helper()
		oss := &infrav1alpha1.OpenStackServer{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels},
			Spec: infrav1alpha1.OpenStackServerSpec{Flavor: ptr.To("m1.tiny"), Image: infrav1.ImageParam{Filter: &infrav1.ImageFilter{Name: ptr.To("img")}},
				IdentityRef: infrav1.OpenStackIdentityReference{Name: "c1-cloud-config", CloudName: "openstack"},
				Ports:       []infrav1.PortOpts{{}}}}
		if err := k.Client.Create(ctx, oss); err != nil {
			t.Fatal(err)
		}
	}
	server("vpn-old", map[string]string{observed.LabelPlan: "p1", observed.LabelGateway: "vpn"})
	server("other-plan", map[string]string{observed.LabelPlan: "p2", observed.LabelGateway: "vpn"})
	server("bastion", nil)
	server(want, nil) // a user's, with the gateway's name

	cached, err := NewCachedClient(ctx, k.Config, func(string, string) {})
	if err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]*Observer{"direct": {Client: k.Client}, "cached": {Client: cached}} {
		s := &observed.Snapshot{}
		if err := o.gateways(ctx, p, s); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := map[string]observed.OpenStackServer{}
		for _, g := range s.Gateways {
			got[g.Name] = g
		}
		testenv.Expect(t, name+" gateways", len(s.Gateways), 2)
		testenv.Expect(t, name+" ours", got["vpn-old"], observed.OpenStackServer{Name: "vpn-old", Plan: "p1", Gateway: "vpn", Flavor: "m1.tiny", Image: "img"})
		testenv.Expect(t, name+" user's with the gateway's name", got[want], observed.OpenStackServer{Name: want, Flavor: "m1.tiny", Image: "img"})
	}
}
