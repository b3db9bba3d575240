package planner

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/golden"

	"sigs.k8s.io/yaml"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/planfile"
)

// planCase is one observed state of an example plan, from testdata/cases.
type planCase struct {
	// Approve overrides the example plan's spec.approve.
	Approve string `json:"approve"`
	// Rollback, when set, is the plan's spec.rollback.to.
	Rollback string            `json:"rollback,omitempty"`
	Snapshot observed.Snapshot `json:"snapshot"`
}

// loadExample decodes plans/<name>.yaml, the example docs/plans.md points at.
func loadExample(t *testing.T, name string) *v1alpha1.MigrationPlan {
	t.Helper()
	path := filepath.Join("..", "..", "plans", name+".yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := planfile.Decode(path, data)
	if err != nil {
		t.Fatalf("example plan does not validate:\n%v", err)
	}
	return f.Plan
}

// planOfCase plans the case at path (testdata/cases/<example>/<case>.yaml)
// for its example plan, with the case's approval and rollback.
func planOfCase(t *testing.T, path string) (*v1alpha1.MigrationPlan, *Result) {
	t.Helper()
	p := loadExample(t, filepath.Base(filepath.Dir(path)))
	c := loadCase(t, path)
	p.Spec.Approve = c.Approve
	if c.Rollback != "" {
		p.Spec.Rollback = &v1alpha1.Rollback{To: c.Rollback}
	}
	res, err := Plan(p, &c.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	return p, res
}

func loadCase(t *testing.T, path string) planCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c planCase
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

// TestGolden plans every example against each of its observed states and
// compares the rendered plan with testdata/golden; -update rewrites them.
func TestGolden(t *testing.T) {
	cases, err := filepath.Glob(filepath.Join("testdata", "cases", "*", "*.yaml"))
	if err != nil || len(cases) == 0 {
		t.Fatalf("no cases under testdata/cases: %v", err)
	}
	for _, path := range cases {
		plan := filepath.Base(filepath.Dir(path))
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(plan+"/"+name, func(t *testing.T) {
			p, res := planOfCase(t, path)
			// A step's key is its identity (the event's message ID):
			// two steps of one result never share one.
			keys := map[string]bool{}
			for _, ph := range res.Phases {
				for _, g := range ph.Groups {
					for _, s := range g.Steps {
						if keys[s.Key] {
							t.Errorf("step key %s twice", s.Key)
						}
						keys[s.Key] = true
					}
				}
			}
			var got bytes.Buffer
			if err := Render(&got, p, res); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", "golden", plan, name+".txt"), got.Bytes())
		})
	}
}

// TestDeterministic: the same input gives the same output byte for byte,
// also when the observer lists objects in another order.
func TestDeterministic(t *testing.T) {
	p := loadExample(t, "capi-quickstart")
	c := loadCase(t, filepath.Join("testdata", "cases", "capi-quickstart", "01-fresh-cluster.yaml"))
	p.Spec.Approve = "workers"
	first, err := Plan(p, &c.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(first)
	wantInputs := inputsJSON(t, first)
	for i := 0; i < 20; i++ {
		s := c.Snapshot
		s.Secrets = append([]observed.Secret(nil), s.Secrets...)
		w := *s.Workload
		w.Nodes = append([]observed.Node(nil), w.Nodes...)
		s.Workload = &w
		rand.Shuffle(len(s.Secrets), func(i, j int) { s.Secrets[i], s.Secrets[j] = s.Secrets[j], s.Secrets[i] })
		rand.Shuffle(len(w.Nodes), func(i, j int) { w.Nodes[i], w.Nodes[j] = w.Nodes[j], w.Nodes[i] })
		again, err := Plan(p, &s)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := json.Marshal(again); !bytes.Equal(got, want) {
			t.Fatalf("run %d differs:\n%s\nwant:\n%s", i, got, want)
		}
		// The steps' inputs, which the result's JSON leaves out, too.
		if got := inputsJSON(t, again); !bytes.Equal(got, wantInputs) {
			t.Fatalf("run %d: inputs differ:\n%s\nwant:\n%s", i, got, wantInputs)
		}
	}
}

// inputsJSON is the JSON of every step's inputs in res, in order.
func inputsJSON(t *testing.T, res *Result) []byte {
	t.Helper()
	var all []*step.Inputs
	for _, ph := range res.Phases {
		for _, g := range ph.Groups {
			for _, s := range g.Steps {
				all = append(all, s.Inputs)
			}
		}
	}
	data, err := json.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestNext checks which group may be published in the states that must
// publish nothing.
func TestNext(t *testing.T) {
	for _, tc := range []struct {
		plan, caseFile string
		approve        string
		wantPhase      string // "" when nothing may run
		wantFirstKey   string
	}{
		{"capi-quickstart", "01-fresh-cluster", "cluster", "cluster", "cluster/copy-secret/secret/capi-quickstart-sa"},
		{"capi-quickstart", "01-fresh-cluster", "", "", ""},       // nothing approved
		{"capi-quickstart", "03-cluster-done", "cluster", "", ""}, // done up to approve
		{"capi-quickstart", "03-cluster-done", "control-plane", "control-plane", "control-plane/create/kubeadmconfig/capi-quickstart-control-plane-7xk2p"},
		{"capi-quickstart", "05-workers-blocked", "workers", "", ""},    // health check
		{"capi-quickstart", "06-approve-moved-back", "cluster", "", ""}, // approval moved back
		{"capi-quickstart", "07-user-paused", "cluster", "", ""},        // user's pause
		{"vsphere-workers", "03-cutover-awaits-dns", "cutover", "", ""}, // waits for a person
		{"vsphere-workers", "03-cutover-awaits-dns", "cleanup", "cleanup", "cleanup/delete/machinedeployment/vsphere-workers-md-0"},
	} {
		p := loadExample(t, tc.plan)
		c := loadCase(t, filepath.Join("testdata", "cases", tc.plan, tc.caseFile+".yaml"))
		p.Spec.Approve = tc.approve
		res, err := Plan(p, &c.Snapshot)
		if err != nil {
			t.Fatal(err)
		}
		next := res.Next()
		switch {
		case tc.wantPhase == "" && next != nil:
			t.Errorf("%s/%s approve=%q: Next() = %v, want nothing", tc.plan, tc.caseFile, tc.approve, next.Steps)
		case tc.wantPhase != "" && (next == nil || res.Runnable != tc.wantPhase || next.Steps[0].Key != tc.wantFirstKey):
			t.Errorf("%s/%s approve=%q: runnable %q, next %v; want phase %s starting with %s", tc.plan, tc.caseFile, tc.approve, res.Runnable, next, tc.wantPhase, tc.wantFirstKey)
		}
	}
}

// TestStepKeysUnique: the event layer derives message IDs from step keys,
// so two steps of one plan must never share one.
func TestStepKeysUnique(t *testing.T) {
	cases, _ := filepath.Glob(filepath.Join("testdata", "cases", "*", "*.yaml"))
	for _, path := range cases {
		p := loadExample(t, filepath.Base(filepath.Dir(path)))
		c := loadCase(t, path)
		p.Spec.Approve = ""
		res, err := Plan(p, &c.Snapshot)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, ph := range res.Phases {
			for _, g := range ph.Groups {
				for _, s := range g.Steps {
					if seen[s.Key] {
						t.Errorf("%s: step key %s appears twice", path, s.Key)
					}
					seen[s.Key] = true
				}
			}
		}
	}
}

// TestRefusals: what the real Cluster API and CAPO controllers would do
// with an adoption blocks its phase before anything is created, with the
// reason: an even number of stacked-etcd control-plane nodes (the
// KubeadmControlPlane webhook refuses it), a node named like CAPO's bastion
// (CAPO deletes it), a Node whose provider ID is another server's (it
// cannot change), an external etcd without the API server's client
// certificate (KubeadmControlPlane cannot make it), an API load balancer on
// a cloud without Octavia.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, approve, phase, want string
		edit                       func(p *v1alpha1.MigrationPlan, s *observed.Snapshot)
	}{{
		name: "two stacked-etcd control-plane nodes", approve: "control-plane", phase: "control-plane",
		want: "2 control-plane nodes with stacked etcd",
		edit: func(_ *v1alpha1.MigrationPlan, s *observed.Snapshot) {
			n := s.Workload.Nodes[0]
			n.Name += "-second"
			s.Workload.Nodes = append(s.Workload.Nodes, n)
		},
	}, {
		name: "the same with external etcd", approve: "control-plane", phase: "control-plane",
		edit: func(_ *v1alpha1.MigrationPlan, s *observed.Snapshot) {
			n := s.Workload.Nodes[0]
			n.Name += "-second"
			s.Workload.Nodes = append(s.Workload.Nodes, n)
			s.Cloud.Servers[n.Name] = "7d1e0c2b-5f4a-4b3c-9d8e-0a1b2c3d4e5f"
			s.Workload.ExternalEtcd = true
		},
	}, {
		name: "a node named like the bastion", approve: "control-plane", phase: "control-plane",
		want: "the name CAPO gives the cluster's bastion",
		edit: func(_ *v1alpha1.MigrationPlan, s *observed.Snapshot) {
			s.Cloud.Servers["capi-quickstart-bastion"] = s.Cloud.Servers[s.Workload.Nodes[0].Name]
			s.Workload.Nodes[0].Name = "capi-quickstart-bastion"
		},
	}, {
		name: "a Node with another server's provider ID", approve: "control-plane", phase: "control-plane",
		want: "a Node's cannot change",
		edit: func(_ *v1alpha1.MigrationPlan, s *observed.Snapshot) {
			s.Workload.Nodes[0].ProviderID = "openstack://RegionOne/0b6a3f4e"
		},
	}, {
		name: "external etcd without the API server's etcd client certificate", approve: "cluster", phase: "cluster",
		want: "Secret default/capi-quickstart-apiserver-etcd-client is missing",
		edit: func(_ *v1alpha1.MigrationPlan, s *observed.Snapshot) {
			if s.Workload == nil {
				s.Workload = &observed.Workload{}
			}
			s.Workload.ExternalEtcd = true
		},
	}, {
		name: "a load balancer without Octavia", approve: "cluster", phase: "cluster",
		want: "lists no load-balancer service (Octavia)",
		edit: func(p *v1alpha1.MigrationPlan, s *observed.Snapshot) {
			p.Spec.Target.APIServer.LoadBalancer = new(true)
		},
	}, {
		name: "a load balancer with Octavia", approve: "cluster", phase: "cluster",
		edit: func(p *v1alpha1.MigrationPlan, s *observed.Snapshot) {
			p.Spec.Target.APIServer.LoadBalancer = new(true)
			s.Cloud.LoadBalancer = true
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := loadExample(t, "capi-quickstart")
			c := loadCase(t, filepath.Join("testdata", "cases", "capi-quickstart", "01-fresh-cluster.yaml"))
			if tc.phase != "cluster" {
				c = loadCase(t, filepath.Join("testdata", "cases", "capi-quickstart", "03-cluster-done.yaml"))
			}
			p.Spec.Approve = tc.approve
			if c.Snapshot.Cloud == nil {
				c.Snapshot.Cloud = &observed.Cloud{Servers: map[string]string{}}
			}
			tc.edit(p, &c.Snapshot)
			res, err := Plan(p, &c.Snapshot)
			if err != nil {
				t.Fatal(err)
			}
			ph := res.Phase(tc.phase)
			blocked := ph.State == Blocked
			switch {
			case tc.want == "" && blocked:
				t.Errorf("phase %s blocked: %s", tc.phase, ph.Reason)
			case tc.want != "" && (!blocked || !strings.Contains(ph.Reason, tc.want)):
				t.Errorf("phase %s is %s (%s); want Blocked with %q", tc.phase, ph.State, ph.Reason, tc.want)
			}
		})
	}
}

// TestControlPlaneVersion: the control plane is adopted at kubeadm's
// kubernetesVersion, which kube-proxy's image carries, even when kubelets
// lag behind it; KubeadmControlPlane would re-tag kube-proxy to its own
// version, and roll out Machines of another one.
func TestControlPlaneVersion(t *testing.T) {
	p := loadExample(t, "capi-quickstart")
	p.Spec.Approve = "control-plane"
	c := loadCase(t, filepath.Join("testdata", "cases", "capi-quickstart", "03-cluster-done.yaml"))
	for i := range c.Snapshot.Workload.Nodes {
		c.Snapshot.Workload.Nodes[i].KubeletVersion = "v1.31.2"
	}
	c.Snapshot.Workload.KubernetesVersion = "1.31.4" // kubeadm accepts it without the v
	res, err := Plan(p, &c.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, g := range res.Phase("control-plane").Groups {
		for _, st := range g.Steps {
			if st.Action == step.Create && (st.Target.Kind == step.KubeadmControlPlane || st.Target.Kind == step.Machine) {
				seen++
				if st.Params["version"] != "v1.31.4" {
					t.Errorf("%s: version %q; want kubeadm's v1.31.4", st.Key, st.Params["version"])
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no KubeadmControlPlane or Machine to create")
	}
}

// TestIncomplete: a phase whose steps the planner could not all judge (a
// workload cluster it could not reach lists no node step) says so, and the
// status then keeps the steps it leaves out as they were.
func TestIncomplete(t *testing.T) {
	path := filepath.Join("testdata", "cases", "vsphere-workers", "02-cutover-midway.yaml")
	for _, reachable := range []bool{true, false} {
		p := loadExample(t, "vsphere-workers")
		c := loadCase(t, path)
		p.Spec.Approve = c.Approve
		if !reachable {
			c.Snapshot.Workload, c.Snapshot.WorkloadError = nil, "connection refused"
		}
		res, err := Plan(p, &c.Snapshot)
		if err != nil {
			t.Fatal(err)
		}
		var cutover *Phase
		for i := range res.Phases {
			if res.Phases[i].Name == v1alpha1.PhaseCutover {
				cutover = &res.Phases[i]
			}
		}
		switch {
		case cutover == nil:
			t.Fatalf("no cutover phase in %+v", res.Phases)
		case reachable && (cutover.Incomplete || len(cutover.Groups) == 0):
			t.Errorf("workload reachable: cutover incomplete=%v with %d groups; want complete, with steps", cutover.Incomplete, len(cutover.Groups))
		case !reachable && (!cutover.Incomplete || cutover.State == Succeeded || len(cutover.Groups) != 0):
			t.Errorf("workload unreachable: cutover %s incomplete=%v with %d groups; want incomplete, no steps, not Succeeded", cutover.State, cutover.Incomplete, len(cutover.Groups))
		}
	}
}
