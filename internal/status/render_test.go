package status

import (
	"bytes"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/golden"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/planner"
)

// checkGolden compares got with testdata/golden/name (golden.Check).
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", "golden", name), got)
}

// approved adds the approvals every rendered case shows.
func approved(st *PlanStatus) *PlanStatus {
	SetApproval(st, Approval{Phase: "cluster", By: "alice", PR: 12})
	SetApproval(st, Approval{Phase: "control-plane", By: "bob", Commit: rev2})
	return st
}

// cpPlanned is the plan at approve control-plane with cluster done and
// the control-plane steps given left.
func cpPlanned(state planner.PhaseState, reason string, done int, steps ...[]step.Step) *planner.Result {
	runnable := "control-plane"
	if state != planner.Approved {
		runnable = ""
	}
	return result("control-plane", runnable, "",
		phase("cluster", planner.Succeeded, "", 6),
		phase("control-plane", state, reason, done, steps...),
		phase("workers", planner.Pending, "not approved: spec.approve is control-plane", 0, []step.Step{drain}, []step.Step{probe}))
}

// clusterDone is the history of a cluster phase that ran to the end.
func clusterDone() []op {
	return []op{
		plan(freshResult(), rev1, 0),
		publish(1, copySecret, keypair),
		apply(ok(copySecret, 1, 5)),
		apply(evt(keypair, events.Retrying, 1, 6, time.Second, "", "409 Conflict: keypair is being created")),
		apply(ok(keypair, 2, 12)),
		plan(clusterLeft(4, []step.Step{mkCluster}, []step.Step{waitOSC}), rev1, 13),
		publish(14, mkCluster),
		apply(ok(mkCluster, 1, 16)),
		plan(clusterLeft(5, []step.Step{waitOSC}), rev1, 17),
		publish(18, waitOSC),
		apply(ok(waitOSC, 1, 300)),
	}
}

func renderCases() map[string]*PlanStatus {
	cases := map[string]*PlanStatus{}

	cases["normal"] = approved(run(append(clusterDone(),
		plan(cpPlanned(planner.Approved, "", 0, []step.Step{mkKCP}, []step.Step{waitKCP}), rev2, 400),
		publish(401, mkKCP),
		apply(ok(mkKCP, 1, 403)),
		plan(cpPlanned(planner.Approved, "", 1, []step.Step{waitKCP}), rev2, 404),
		publish(405, waitKCP),
		apply(func() *events.ResultEvent {
			e := evt(waitKCP, events.Retrying, 2, 900, 5*time.Minute, "", "KubeadmControlPlane default/capi-quickstart-control-plane: 1 of 3 replicas ready")
			e.Revision = rev2
			return e
		}()),
	)...))

	failure := "authenticate to cloud openstack: 401 Unauthorized: {\"error\": {\"message\": \"The request you have made requires authentication.\", \"code\": 401}}\n" +
		"hint: check the clouds.yaml in Secret default/capi-quickstart-cloud-config | <b>not html</b> *not bold*"
	cases["failed"] = approved(run(
		plan(freshResult(), rev1, 0),
		publish(1, copySecret, keypair),
		apply(ok(copySecret, 1, 5)),
		apply(evt(keypair, events.Failed, 3, 40, 800*time.Millisecond, "", failure)),
	))

	cases["blocked"] = approved(run(append(clusterDone(),
		plan(cpPlanned(planner.Blocked, "KubeadmControlPlane capi-quickstart-control-plane has 3 replicas but the workload cluster has 2 control-plane nodes; fix the KCP or the nodes first", 0,
			[]step.Step{mkKCP}, []step.Step{waitKCP}), rev2, 400),
	)...))

	stopped := result("cluster", "", "spec.approve moved back from control-plane to cluster: ferry stops before its next step and rolls nothing back; approve control-plane again to go on",
		phase("cluster", planner.Succeeded, "", 6),
		phase("control-plane", planner.Pending, "not approved: spec.approve is cluster", 1, []step.Step{waitKCP}),
		phase("workers", planner.Pending, "not approved: spec.approve is cluster", 0, []step.Step{drain}, []step.Step{probe}))
	cases["stopped"] = approved(run(append(clusterDone(),
		plan(cpPlanned(planner.Approved, "", 0, []step.Step{mkKCP}, []step.Step{waitKCP}), rev2, 400),
		publish(401, mkKCP),
		apply(ok(mkKCP, 1, 403)),
		plan(stopped, rev2, 404),
	)...))
	cases["invalid"] = approved(run(clusterDone()...))
	MarkInvalid(cases["invalid"], rev2, []string{
		"plans/capi-quickstart.yaml:14: spec.target.controlPlane.flavor: required",
		"plans/capi-quickstart.yaml:21: spec.approve: \"control-plain\" is not a phase of strategy adopt (cluster, control-plane, workers, rollout)",
	}, at(500))
	cases["unobserved"] = approved(run(clusterDone()...))
	MarkUnobserved(cases["unobserved"], rev2, `observe cluster default/capi-quickstart: get Secret capi-backup/capi-quickstart-kubeconfig: secrets "capi-quickstart-kubeconfig" is forbidden: User "system:serviceaccount:ferry-system:ferry-reconciler" cannot get resource "secrets" in the namespace "capi-backup"`, at(500))
	return cases
}

// manyWorkers is a status whose workers phase drains n nodes.
func manyWorkers(n int, errText string) *PlanStatus {
	var steps []step.Step
	for i := range n {
		steps = append(steps, mkStep("workers", step.Workload, step.Drain, step.Node, "", fmt.Sprintf("capi-quickstart-md-0-%04d", i)))
	}
	res := result("workers", "workers", "",
		phase("cluster", planner.Succeeded, "", 6),
		phase("control-plane", planner.Succeeded, "", 2),
		phase("workers", planner.Approved, "", 0, steps))
	st := FromResult(nil, res, rev1, t0)
	Published(st, steps, at(1))
	for i, s := range steps {
		if i%3 == 0 {
			ApplyResult(st, ok(s, 1, 10+i))
		} else {
			ApplyResult(st, evt(s, events.Retrying, 2, 10+i, time.Minute, "", errText))
		}
	}
	return approved(st)
}

func TestStatusTable(t *testing.T) {
	for name, st := range renderCases() {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Table(&b, st); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, name+".txt", b.Bytes())
		})
	}
}

func TestStatusMarkdown(t *testing.T) {
	const link = "https://github.com/example/plans/blob/ferry/status/status/capi-quickstart.yaml"
	for name, st := range renderCases() {
		t.Run(name, func(t *testing.T) {
			got := Markdown(st, 0, link)
			if strings.Contains(got, "… ") {
				t.Errorf("a short status was truncated")
			}
			checkGolden(t, name+".md", []byte(got))
		})
	}
	t.Run("truncated", func(t *testing.T) {
		const limit = 3000
		got := Markdown(manyWorkers(40, "drain Node: cannot evict pod shop/web-0: Cannot evict pod as it would violate the pod's disruption budget."), limit, link)
		if len(got) > limit {
			t.Errorf("Markdown is %d bytes; limit %d", len(got), limit)
		}
		if !strings.Contains(got, "more steps; full status: "+link+"\n") {
			t.Errorf("truncated Markdown does not end with the link:\n%s", got)
		}
		checkGolden(t, "truncated.md", []byte(got))
	})
}

// TestStatusMarkdownLimit: whatever the status holds, the comment stays within
// the limit: GitHub's by default, and tiny ones.
func TestStatusMarkdownLimit(t *testing.T) {
	huge := strings.Repeat("ünïcode error text | ", 600) // ~13 KB per step
	st := manyWorkers(500, huge)
	st.Stopped = strings.Repeat("stopped ", 5000)
	for _, limit := range []int{0, 65536, 20000, 1500, 200, 10} {
		got := Markdown(st, limit, "https://example.invalid/status")
		max := limit
		if max == 0 {
			max = MaxCommentLength
		}
		if len(got) > max {
			t.Errorf("limit %d: Markdown is %d bytes", limit, len(got))
		}
		if !utf8.ValidString(got) {
			t.Errorf("limit %d: Markdown cut inside a character", limit)
		}
		if limit >= 1500 && !strings.Contains(got, "more steps; full status: https://example.invalid/status") {
			t.Errorf("limit %d: no link to the full status", limit)
		}
	}
}

// TestStatusEncode shows the status file's format and reads it back.
func TestStatusEncode(t *testing.T) {
	st := renderCases()["normal"]
	st.Created = []events.Resource{{Kind: "Keypair", ID: "capi-key", Name: "capi-key"}}
	// "no" is a boolean to YAML 1.1 readers: it must come back a string.
	st.Checks = []string{"no", "workers/probe/node/capi-quickstart-md-0-wq8fz"}
	data, err := Encode(st)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "normal.yaml", data)
	back, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, st) {
		t.Errorf("decoded status differs:\n%+v\nwant\n%+v", back, st)
	}
}

// TestClone: a clone holds what the original holds (its file is the
// same), and changing any list of it leaves the original alone.
func TestClone(t *testing.T) {
	for name, st := range renderCases() {
		st.Checks = append(st.Checks, "workers/probe/url")
		st.Created = append(st.Created, events.Resource{Kind: "keypair", Name: "k"})
		want, err := Encode(st)
		if err != nil {
			t.Fatal(err)
		}
		c := st.Clone()
		got, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: clone differs:\n%s\nwant:\n%s", name, got, want)
		}
		c.Checks[0], c.Created[0].Name = "changed", "changed"
		c.ApprovedBy[0].By = "changed"
		c.Phases[0].Steps[0].State = StepFailed
		c.Phases[0].Name = "changed"
		if len(c.Invalid) > 0 {
			c.Invalid[0] = "changed"
		}
		if after, _ := Encode(st); string(after) != string(want) {
			t.Errorf("%s: changing the clone changed the original", name)
		}
	}
}
