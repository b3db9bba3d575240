package planner

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/step"
)

// TestInputs: every step of every case carries the inputs its executor
// needs of the plan (step.Inputs), resolved from the plan as it is, and
// the parameters an executor parses read back as the plan's values, so
// that an executor never goes back to the plan.
func TestInputs(t *testing.T) {
	cases, err := filepath.Glob(filepath.Join("testdata", "cases", "*", "*.yaml"))
	if err != nil || len(cases) == 0 {
		t.Fatalf("no cases under testdata/cases: %v", err)
	}
	seen := map[string]bool{} // what the cases reach, checked at the end
	for _, path := range cases {
		example := filepath.Base(filepath.Dir(path))
		t.Run(example+"/"+strings.TrimSuffix(filepath.Base(path), ".yaml"), func(t *testing.T) {
			p, res := planOfCase(t, path)
			for _, ph := range res.Phases {
				for _, g := range ph.Groups {
					for _, s := range g.Steps {
						checkInputs(t, p, s, seen)
					}
				}
			}
		})
	}
	for _, what := range []string{"ensure-keypair", "resolve", "check-quota", "security groups", "empty nodeSelector", "machine template", "openstack cluster"} {
		if !seen[what] {
			t.Errorf("no case plans a step with %s: the test checks nothing of it", what)
		}
	}
}

// checkInputs checks one step's inputs against the plan p.
func checkInputs(t *testing.T, p *v1alpha1.MigrationPlan, s step.Step, seen map[string]bool) {
	t.Helper()
	in, tgt := s.Inputs, p.Spec.Target
	if in == nil {
		t.Errorf("%s: no inputs", s.Key)
		return
	}
	if in.Cluster != p.Spec.Cluster {
		t.Errorf("%s: cluster %+v, want the plan's %+v", s.Key, in.Cluster, p.Spec.Cluster)
	}
	if want := (step.ObjectRef{Kind: tgt.ControlPlane.Provider, Name: tgt.ControlPlane.Name}); in.ControlPlane != want {
		t.Errorf("%s: control plane %+v, want %+v", s.Key, in.ControlPlane, want)
	}
	if s.Executor == step.OpenStack && (in.Identity == nil || !reflect.DeepEqual(*in.Identity, tgt.Identity)) {
		t.Errorf("%s: identity %+v, want the plan's %+v", s.Key, in.Identity, tgt.Identity)
	}
	expect := func(what string, got, want any) {
		t.Helper()
		seen[what] = true
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %s %#v, want %#v", s.Key, what, got, want)
		}
	}
	switch {
	case s.Action == step.EnsureKeypair:
		expect("ensure-keypair", in.PublicKey, tgt.SSHKey.PublicKey)
	case s.Action == step.Resolve:
		expect("resolve", in.CloudNames, p.CloudNames())
	case s.Action == step.CheckQuota:
		expect("check-quota", in.Machines, p.NewMachines())
	case s.Action == step.Apply && p.Spec.Manifests != nil && p.Spec.Manifests.CloudControllerManager != nil &&
		s.Target.Name == p.Spec.Manifests.CloudControllerManager.Path:
		ccm := p.Spec.Manifests.CloudControllerManager
		want := &step.Scheduling{NodeSelector: ccm.NodeSelector, Tolerations: ccm.Tolerations}
		if ccm.NodeSelector != nil && len(ccm.NodeSelector) == 0 {
			expect("empty nodeSelector", in.Scheduling.NodeSelector != nil, true)
		}
		expect("scheduling", in.Scheduling, want)
	case s.Action == step.Create && s.Target.Kind == step.OpenStackMachineTemplate:
		byID, network, err := s.Params.NetworkPort()
		expect("machine template", []any{byID, network, err}, []any{tgt.Network.ID != "", tgt.Network.ID + tgt.Network.Name, nil})
	case s.Action == step.Create && s.Target.Kind == step.OpenStackCluster:
		checkOpenStackClusterParams(t, tgt, s, expect)
		if tgt.SecurityGroups != nil {
			expect("security groups", in.SecurityGroups, tgt.SecurityGroups)
		} else if in.SecurityGroups != nil {
			t.Errorf("%s: security groups %+v, and the plan has none", s.Key, in.SecurityGroups)
		}
	default:
		if in.Scheduling != nil || in.SecurityGroups != nil || in.PublicKey != "" || in.CloudNames != nil || in.Machines != nil {
			t.Errorf("%s: inputs of another step: %+v", s.Key, in)
		}
	}
}

// checkOpenStackClusterParams: the parameters the kube executor builds
// the OpenStackCluster from read back, through their getters, as the
// plan's target.
func checkOpenStackClusterParams(t *testing.T, tgt v1alpha1.Target, s step.Step, expect func(string, any, any)) {
	t.Helper()
	p := s.Params
	byID, network, err := p.Resource(step.ParamNetwork)
	expect("openstack cluster", []any{byID, network, err}, []any{tgt.Network.ID != "", tgt.Network.ID + tgt.Network.Name, nil})
	subnets, err := p.Resources(step.ParamSubnets)
	var want []step.ResourceRef
	for _, r := range tgt.Subnets {
		want = append(want, step.ResourceRef{ByID: r.ID != "", Value: r.ID + r.Name})
	}
	expect("openstack cluster subnets", []any{subnets, err}, []any{want, nil})
	for key, wantFlag := range map[string]bool{
		step.ParamDisableExternalNetwork:  tgt.ExternalNetwork == nil,
		step.ParamAPIServerLoadBalancer:   *tgt.APIServer.LoadBalancer,
		step.ParamDisableAPIServerFloatIP: !*tgt.APIServer.FloatingIP,
	} {
		got, err := p.Bool(key)
		expect("openstack cluster "+key, []any{got, err}, []any{wantFlag, nil})
	}
	if tgt.ExternalNetwork != nil {
		byID, network, err := p.Resource(step.ParamExternalNetwork)
		expect("openstack cluster external network", []any{byID, network, err},
			[]any{tgt.ExternalNetwork.ID != "", tgt.ExternalNetwork.ID + tgt.ExternalNetwork.Name, nil})
	} else {
		expect("openstack cluster external network", p.Get(step.ParamExternalNetwork), "")
	}
	expect("openstack cluster fixed IP", p.Get(step.ParamAPIServerFixedIP), tgt.APIServer.FixedIP)
	expect("openstack cluster zones", p.Get(step.ParamControlPlaneZones), tgt.FailureDomain)
	id, cloud, ok, err := p.IdentityRef()
	expect("openstack cluster identity", []any{id, cloud, ok, err}, []any{tgt.Identity.SecretName, tgt.Identity.CloudName, true, nil})
}

// TestInputsLeaveTheStepJSON: a step's JSON, which the status and
// `reconciler plan -o json` show, holds no inputs: what people read of a
// step is its parameters.
func TestInputsLeaveTheStepJSON(t *testing.T) {
	p := loadExample(t, "capi-quickstart")
	c := loadCase(t, filepath.Join("testdata", "cases", "capi-quickstart", "01-fresh-cluster.yaml"))
	p.Spec.Approve = c.Approve
	res, err := Plan(p, &c.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	for _, inputsOnly := range []string{`"inputs"`, p.Spec.Target.SSHKey.PublicKey} {
		if strings.Contains(string(data), inputsOnly) {
			t.Errorf("the result's JSON holds %s", inputsOnly)
		}
	}
}
