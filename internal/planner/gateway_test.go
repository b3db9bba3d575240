package planner

import (
	"path/filepath"
	"testing"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/step"
)

// TestGatewayWithoutOverlay: a gateway alone makes the network-bridge
// phase, which builds it and waits for it, and then nothing else.
func TestGatewayWithoutOverlay(t *testing.T) {
	p := loadExample(t, "vsphere-gateway")
	p.Spec.Manifests = nil
	c := loadCase(t, filepath.Join("testdata", "cases", "vsphere-gateway", "01-gateway-created.yaml"))
	p.Spec.Approve = v1alpha1.PhaseNetworkBridge
	res, err := Plan(p, &c.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	ph := res.Phase(v1alpha1.PhaseNetworkBridge)
	if ph == nil {
		t.Fatalf("no network-bridge phase with a gateway alone: %v", p.Phases())
	}
	var got []string
	for _, g := range ph.Groups {
		for _, s := range g.Steps {
			got = append(got, string(s.Action)+" "+s.Target.Kind)
		}
	}
	want := []string{"copy-secret " + step.Secret, "create " + step.OpenStackServer, "wait " + step.OpenStackServer}
	if len(got) != len(want) {
		t.Fatalf("network-bridge steps %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("step %d is %q, want %q", i+1, got[i], want[i])
		}
	}
}

// TestGatewayServerName: the name changes with the flavor and the image,
// and only with them.
func TestGatewayServerName(t *testing.T) {
	g := v1alpha1.Gateway{Name: "vpn", Flavor: "m1.small", Image: "img"}
	base := g.ServerName()
	if len(base) != len("vpn-")+8 {
		t.Errorf("ServerName %q: want vpn-<8 hex digits>", base)
	}
	for _, other := range []v1alpha1.Gateway{{Name: "vpn", Flavor: "m1.tiny", Image: "img"}, {Name: "vpn", Flavor: "m1.small", Image: "img2"},
		{Name: "vpn", Flavor: "m1.smal", Image: "limg"}} {
		if other.ServerName() == base {
			t.Errorf("%+v has the name of %+v: %s", other, g, base)
		}
	}
	g.SecurityGroups = []string{"sg"}
	if g.ServerName() != base {
		t.Errorf("security groups changed the name")
	}
}
