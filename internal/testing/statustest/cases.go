package statustest

import (
	"fmt"
	"time"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/step"
)

// Whole statuses, built through the merge as the reconciler builds them:
// the cases the renderers' and the status file's golden files show.

// Approved adds the approvals every rendered case shows.
func Approved(st *status.PlanStatus) *status.PlanStatus {
	status.SetApproval(st, status.Approval{Phase: "cluster", By: "alice", PR: 12})
	status.SetApproval(st, status.Approval{Phase: "control-plane", By: "bob", Commit: Rev2})
	return st
}

// cpPlanned is the plan at approve control-plane with cluster done and
// the control-plane steps given left.
func cpPlanned(state planner.PhaseState, reason string, done int, steps ...[]step.Step) *planner.Result {
	runnable := "control-plane"
	if state != planner.Approved {
		runnable = ""
	}
	return Result("control-plane", runnable, "",
		Phase("cluster", planner.Succeeded, "", 6),
		Phase("control-plane", state, reason, done, steps...),
		Phase("workers", planner.Pending, "not approved: spec.approve is control-plane", 0, []step.Step{Drain}, []step.Step{Probe}))
}

// clusterDone is the history of a cluster phase that ran to the end.
func clusterDone() []Op {
	return []Op{
		Plan(FreshResult(), Rev1, 0),
		Publish(1, CopySecret, Keypair),
		Apply(OK(CopySecret, 1, 5)),
		Apply(Event(Keypair, events.Retrying, 1, 6, time.Second, "", "409 Conflict: keypair is being created")),
		Apply(OK(Keypair, 2, 12)),
		Plan(ClusterLeft(4, []step.Step{MkCluster}, []step.Step{WaitOSC}), Rev1, 13),
		Publish(14, MkCluster),
		Apply(OK(MkCluster, 1, 16)),
		Plan(ClusterLeft(5, []step.Step{WaitOSC}), Rev1, 17),
		Publish(18, WaitOSC),
		Apply(OK(WaitOSC, 1, 300)),
	}
}

// Cases are the statuses the golden files show, by name: normal (a phase
// running, a step retrying), failed, blocked, stopped, invalid and
// unobserved; each call builds them afresh.
func Cases() map[string]*status.PlanStatus {
	cases := map[string]*status.PlanStatus{}

	cases["normal"] = Approved(Run(append(clusterDone(),
		Plan(cpPlanned(planner.Approved, "", 0, []step.Step{MkKCP}, []step.Step{WaitKCP}), Rev2, 400),
		Publish(401, MkKCP),
		Apply(OK(MkKCP, 1, 403)),
		Plan(cpPlanned(planner.Approved, "", 1, []step.Step{WaitKCP}), Rev2, 404),
		Publish(405, WaitKCP),
		Apply(func() *events.ResultEvent {
			e := Event(WaitKCP, events.Retrying, 2, 900, 5*time.Minute, "", "KubeadmControlPlane default/capi-quickstart-control-plane: 1 of 3 replicas ready")
			e.Revision = Rev2
			return e
		}()),
	)...))

	failure := "authenticate to cloud openstack: 401 Unauthorized: {\"error\": {\"message\": \"The request you have made requires authentication.\", \"code\": 401}}\n" +
		"hint: check the clouds.yaml in Secret default/capi-quickstart-cloud-config | <b>not html</b> *not bold*"
	cases["failed"] = Approved(Run(
		Plan(FreshResult(), Rev1, 0),
		Publish(1, CopySecret, Keypair),
		Apply(OK(CopySecret, 1, 5)),
		Apply(Event(Keypair, events.Failed, 3, 40, 800*time.Millisecond, "", failure)),
	))

	cases["blocked"] = Approved(Run(append(clusterDone(),
		Plan(cpPlanned(planner.Blocked, "KubeadmControlPlane capi-quickstart-control-plane has 3 replicas but the workload cluster has 2 control-plane nodes; fix the KCP or the nodes first", 0,
			[]step.Step{MkKCP}, []step.Step{WaitKCP}), Rev2, 400),
	)...))

	stopped := Result("cluster", "", "spec.approve moved back from control-plane to cluster: ferry stops before its next step and rolls nothing back; approve control-plane again to go on",
		Phase("cluster", planner.Succeeded, "", 6),
		Phase("control-plane", planner.Pending, "not approved: spec.approve is cluster", 1, []step.Step{WaitKCP}),
		Phase("workers", planner.Pending, "not approved: spec.approve is cluster", 0, []step.Step{Drain}, []step.Step{Probe}))
	cases["stopped"] = Approved(Run(append(clusterDone(),
		Plan(cpPlanned(planner.Approved, "", 0, []step.Step{MkKCP}, []step.Step{WaitKCP}), Rev2, 400),
		Publish(401, MkKCP),
		Apply(OK(MkKCP, 1, 403)),
		Plan(stopped, Rev2, 404),
	)...))
	cases["invalid"] = Approved(Run(clusterDone()...))
	status.MarkInvalid(cases["invalid"], Rev2, []string{
		"plans/capi-quickstart.yaml:14: spec.target.controlPlane.flavor: required",
		"plans/capi-quickstart.yaml:21: spec.approve: \"control-plain\" is not a phase of strategy adopt (cluster, control-plane, workers, rollout)",
	}, At(500))
	cases["unobserved"] = Approved(Run(clusterDone()...))
	status.MarkUnobserved(cases["unobserved"], Rev2, `observe cluster default/capi-quickstart: get Secret capi-backup/capi-quickstart-kubeconfig: secrets "capi-quickstart-kubeconfig" is forbidden: User "system:serviceaccount:ferry-system:ferry-reconciler" cannot get resource "secrets" in the namespace "capi-backup"`, At(500))
	return cases
}

// ManyWorkers is a status whose workers phase drains n nodes: every
// third drain succeeded, the others retry with errText.
func ManyWorkers(n int, errText string) *status.PlanStatus {
	var steps []step.Step
	for i := range n {
		steps = append(steps, Step("workers", step.Workload, step.Drain, step.Node, "", fmt.Sprintf("capi-quickstart-md-0-%04d", i)))
	}
	res := Result("workers", "workers", "",
		Phase("cluster", planner.Succeeded, "", 6),
		Phase("control-plane", planner.Succeeded, "", 2),
		Phase("workers", planner.Approved, "", 0, steps))
	st := status.FromResult(nil, res, Rev1, T0)
	status.Published(st, steps, At(1))
	for i, s := range steps {
		if i%3 == 0 {
			status.ApplyResult(st, OK(s, 1, 10+i))
		} else {
			status.ApplyResult(st, Event(s, events.Retrying, 2, 10+i, time.Minute, "", errText))
		}
	}
	return Approved(st)
}

// The inventory of a replace plan's cleanup: the gateway ferry created,
// to remove; a user's gateway, left; the old pool, removed.
var (
	OurGateway   = planner.InventoryItem{Resource: "OpenStackServer tenants/vpn-gateway-09703f29", State: planner.InventoryToRemove, Reason: "the gateway ferry created"}
	UsersGateway = planner.InventoryItem{Resource: "OpenStackServer tenants/vpn-gateway-99985c5d", State: planner.InventoryLeft, Reason: "ferry did not create it"}
	OldPool      = planner.InventoryItem{Resource: "MachineDeployment tenants/vsphere-gateway-md-0", State: planner.InventoryRemoved, Reason: "named in spec.replace.oldMachineDeployments"}
)

// CleanupResult is a replace plan's cleanup with the planner's inventory.
func CleanupResult(inv ...planner.InventoryItem) *planner.Result {
	gw := Step("cleanup", step.Kube, step.Delete, step.OpenStackServer, "tenants", "vpn-gateway-09703f29")
	res := Result("cleanup", "cleanup", "", Phase("cleanup", planner.Approved, "", 1, []step.Step{gw}))
	res.Inventory = inv
	return res
}

// CleanedUp is the status of a cleanup planned with the three items of
// the inventory, then again once OurGateway is gone: it is recorded
// removed (status's TestInventory).
func CleanedUp() *status.PlanStatus {
	st := status.FromResult(nil, CleanupResult(OurGateway, UsersGateway, OldPool), Rev1, At(1))
	return status.FromResult(st, CleanupResult(UsersGateway, OldPool), Rev1, At(2))
}
