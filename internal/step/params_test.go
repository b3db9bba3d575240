package step_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/step"
)

// TestParamsRoundTrip: what the planner encodes, the executors decode to
// the same values, through the one codec.
func TestParamsRoundTrip(t *testing.T) {
	secret, cloud := "c-cloud-config", "openstack"
	p := step.NewParams(
		step.ParamPaused, step.Bool(true),
		step.ParamReplicas, step.Int(3),
		step.ParamTimeout, "90s",
		step.ParamInfrastructureRef, step.Ref(step.OpenStackMachine, "node-a"),
		step.ParamIdentityRef, step.IdentityRef(secret, cloud),
		step.ParamFrom, step.NamespacedName("backup", "c-ca"),
		step.ParamKeys, step.KeyCopy{Dst: "clouds.yaml", Src: "clouds"}.String()+","+step.KeyCopy{Dst: "cacert", Src: "ca"}.String(),
		step.ParamKubeletExtraArgs, "cloud-provider=external",
		step.ParamVersion, "", // empty values are dropped
	)
	if _, ok := p[step.ParamVersion]; ok {
		t.Errorf("an empty value was kept: %v", p)
	}
	if !p.Flag(step.ParamPaused) || p.Flag(step.ParamControlPlane) {
		t.Errorf("Flag: paused %v, controlPlane %v", p.Flag(step.ParamPaused), p.Flag(step.ParamControlPlane))
	}
	if n, err := p.Count(step.ParamReplicas); err != nil || n != 3 {
		t.Errorf("Count = %d, %v", n, err)
	}
	if d, err := p.Duration(step.ParamTimeout, time.Hour); err != nil || d != 90*time.Second {
		t.Errorf("Duration = %s, %v", d, err)
	}
	if d, err := p.Duration(step.ParamFor, time.Hour); err != nil || d != time.Hour {
		t.Errorf("Duration of an absent parameter = %s, %v; want the default", d, err)
	}
	if r, err := p.Ref(step.ParamInfrastructureRef); err != nil || r != (step.ObjectRef{Kind: step.OpenStackMachine, Name: "node-a"}) {
		t.Errorf("Ref = %+v, %v", r, err)
	}
	if s, c, ok, err := p.IdentityRef(); err != nil || !ok || s != secret || c != cloud {
		t.Errorf("IdentityRef = %s, %s, %v, %v", s, c, ok, err)
	}
	if ns, name, err := p.NamespacedName(step.ParamFrom); err != nil || ns != "backup" || name != "c-ca" {
		t.Errorf("NamespacedName = %s, %s, %v", ns, name, err)
	}
	keys, err := p.KeyCopies()
	if want := []step.KeyCopy{{Dst: "clouds.yaml", Src: "clouds"}, {Dst: "cacert", Src: "ca"}}; err != nil || !reflect.DeepEqual(keys, want) {
		t.Errorf("KeyCopies = %v, %v; want %v", keys, err, want)
	}
	if m, err := p.Map(step.ParamKubeletExtraArgs); err != nil || m["cloud-provider"] != "external" {
		t.Errorf("Map = %v, %v", m, err)
	}
}

// TestParamsOfCAPOObjects: the network, subnets and flags an
// OpenStackCluster and a machine template are built from read back as
// the planner wrote them.
func TestParamsOfCAPOObjects(t *testing.T) {
	p := step.NewParams(
		step.ParamSubnets, step.Resources(step.Resource(false, "k8s-subnet"), step.Resource(true, "6f1c")),
		step.ParamPorts, step.NetworkPort(step.Resource(true, "9a0e")),
		step.ParamDisableExternalNetwork, step.Bool(false),
		step.ParamAPIServerLoadBalancer, step.Bool(true),
	)
	want := []step.ResourceRef{{ByID: false, Value: "k8s-subnet"}, {ByID: true, Value: "6f1c"}}
	if got, err := p.Resources(step.ParamSubnets); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Resources = %+v, %v; want %+v", got, err, want)
	}
	if got, err := p.Resources(step.ParamNetwork); err != nil || got != nil {
		t.Errorf("Resources of an absent parameter = %+v, %v; want none", got, err)
	}
	if byID, network, err := p.NetworkPort(); err != nil || !byID || network != "9a0e" {
		t.Errorf("NetworkPort = %v, %q, %v", byID, network, err)
	}
	if b, err := p.Bool(step.ParamDisableExternalNetwork); err != nil || b {
		t.Errorf("Bool(false) = %v, %v", b, err)
	}
	if b, err := p.Bool(step.ParamAPIServerLoadBalancer); err != nil || !b {
		t.Errorf("Bool(true) = %v, %v", b, err)
	}
}

// TestParamsDefects: a parameter that does not parse is a defect of the
// step, which no retry mends: terminal.
func TestParamsDefects(t *testing.T) {
	for _, tc := range []struct {
		name string
		read func(step.Params) error
		p    step.Params
	}{
		{"missing count", func(p step.Params) error { _, err := p.Count(step.ParamReplicas); return err }, nil},
		{"negative count", func(p step.Params) error { _, err := p.Count(step.ParamReplicas); return err }, step.Params{step.ParamReplicas: "-1"}},
		{"no duration", func(p step.Params) error { _, err := p.Duration(step.ParamTimeout, 0); return err }, step.Params{step.ParamTimeout: "soon"}},
		{"no Kind/name", func(p step.Params) error { _, err := p.Ref(step.ParamOwner); return err }, step.Params{step.ParamOwner: "md"}},
		{"no secret#cloud", func(p step.Params) error { _, _, _, err := p.IdentityRef(); return err }, step.Params{step.ParamIdentityRef: "secret"}},
		{"no namespace/name", func(p step.Params) error { _, _, err := p.NamespacedName(step.ParamFrom); return err }, step.Params{step.ParamFrom: "x"}},
		{"no key=value", func(p step.Params) error { _, err := p.Map(step.ParamLabel); return err }, step.Params{step.ParamLabel: "a=b,c"}},
		{"no dst<-src", func(p step.Params) error { _, err := p.KeyCopies(); return err }, step.Params{step.ParamKeys: "cacert=ca.pem"}},
		{"no status", func(p step.Params) error { _, err := p.Expect(); return err }, step.Params{step.ParamExpect: "ok"}},
		{"missing flag", func(p step.Params) error { _, err := p.Bool(step.ParamAPIServerLoadBalancer); return err }, nil},
		{"no true or false", func(p step.Params) error { _, err := p.Bool(step.ParamAPIServerLoadBalancer); return err }, step.Params{step.ParamAPIServerLoadBalancer: "1"}},
		{"no name= or id=", func(p step.Params) error { _, err := p.Resources(step.ParamSubnets); return err }, step.Params{step.ParamSubnets: "name=a;b"}},
		{"missing port", func(p step.Params) error { _, _, err := p.NetworkPort(); return err }, nil},
		{"no network port", func(p step.Params) error { _, _, err := p.NetworkPort(); return err }, step.Params{step.ParamPorts: "name=net"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.read(tc.p); !failure.IsTerminal(err) {
				t.Errorf("error %v; want a terminal one", err)
			}
		})
	}
}

// TestExpect: a status class or an exact code; 2xx without one.
func TestExpect(t *testing.T) {
	for _, tc := range []struct {
		expect string
		code   int
		want   bool
	}{{"", 204, true}, {"", 302, false}, {"3xx", 302, true}, {"204", 200, false}, {"204", 204, true}} {
		ok, err := step.Params{step.ParamExpect: tc.expect}.Expect()
		if err != nil || ok(tc.code) != tc.want {
			t.Errorf("expect %q, status %d: %v, %v; want %v", tc.expect, tc.code, err == nil && ok(tc.code), err, tc.want)
		}
	}
}

// TestStepString: the line a pull-request comment shows, parameters
// sorted by key.
func TestStepString(t *testing.T) {
	s := step.Step{Executor: step.Kube, Action: step.Create, Target: step.Target{Kind: step.Cluster, Namespace: "default", Name: "c"},
		Params: step.NewParams(step.ParamPaused, step.Bool(true), step.ParamInfrastructureRef, step.Ref(step.OpenStackCluster, "c")),
		Reason: "created paused"}
	want := "kube: create Cluster default/c (infrastructureRef=OpenStackCluster/c, paused=true): created paused"
	if got := s.String(); got != want {
		t.Errorf("String() = %q; want %q", got, want)
	}
	if got := (step.Target{Kind: step.Node, Name: "n"}).String(); got != "Node n" {
		t.Errorf("a cluster-scoped target reads %q", got)
	}
}
