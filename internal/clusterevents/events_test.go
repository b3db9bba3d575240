package clusterevents

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/ferry-dev/ferry/internal/redact"
	"github.com/ferry-dev/ferry/internal/status"
)

// plan is a three-phase status with the given states, approved by bob in
// #1 up to the phase named in approve.
func plan(approve string, states ...status.PhaseState) *status.PlanStatus {
	st := &status.PlanStatus{Plan: "capi-quickstart", Approve: approve}
	if approve != "" {
		st.ApprovedBy = []status.Approval{{Phase: approve, By: "bob", PR: 1}}
	}
	for i, name := range []string{"cluster", "control-plane", "workers"} {
		st.Phases = append(st.Phases, status.PhaseStatus{Name: name, State: states[i]})
	}
	return st
}

// with changes a copy of st.
func with(st *status.PlanStatus, change func(*status.PlanStatus)) *status.PlanStatus {
	c := st.Clone()
	change(c)
	return c
}

const (
	pending     = status.PhasePending
	approved    = status.PhaseApproved
	running     = status.PhaseRunning
	succeeded   = status.PhaseSucceeded
	failed      = status.PhaseFailed
	blocked     = status.PhaseBlocked
	rollingBack = status.PhaseRollingBack
	rolledBack  = status.PhaseRolledBack
)

func normal(reason, msg string) Event {
	return Event{Type: corev1.EventTypeNormal, Reason: reason, Message: msg}
}
func warning(reason, msg string) Event {
	return Event{Type: corev1.EventTypeWarning, Reason: reason, Message: msg}
}

func TestTransitions(t *testing.T) {
	failedStep := status.StepStatus{Key: "cluster/copy-secret/secret/capi-quickstart-cloud-config", Executor: "kube", Action: "copy-secret",
		Target: "Secret default/capi-quickstart-cloud-config", State: status.StepFailed, LastError: `admission denied: "an outage"`}
	failing := with(plan("cluster", failed, pending, pending), func(st *status.PlanStatus) {
		st.Phases[0].Reason = "step " + failedStep.Key + " failed: " + failedStep.LastError
		st.Phases[0].Steps = []status.StepStatus{failedStep}
	})
	rollback := with(plan("workers", succeeded, succeeded, rollingBack), func(st *status.PlanStatus) {
		st.Rollback = "control-plane"
		st.ApprovedBy = append(st.ApprovedBy, status.Approval{Phase: status.RollbackApproval("control-plane"), By: "alice", PR: 7})
		st.Phases[2].Undo = true
	})
	for _, tc := range []struct {
		name string
		prev *status.PlanStatus // nil: nothing reported yet
		cur  *status.PlanStatus
		want []Event
	}{
		{name: "a new plan's pending phases say nothing", cur: plan("", pending, pending, pending)},
		{name: "nothing changed", prev: plan("cluster", running, pending, pending), cur: plan("cluster", running, pending, pending)},
		{name: "a restored status that did not move", prev: plan("workers", succeeded, succeeded, succeeded), cur: plan("workers", succeeded, succeeded, succeeded)},
		{name: "approved and started in one cycle", prev: plan("", pending, pending, pending), cur: plan("cluster", running, pending, pending),
			want: []Event{normal(ReasonPhaseRunning, "Phase cluster is running (approved by bob in #1)")}},
		{name: "an approval covers the phases before it", prev: plan("", pending, pending, pending), cur: plan("control-plane", succeeded, running, pending),
			want: []Event{
				normal(ReasonPhaseSucceeded, "Phase cluster succeeded (approved by bob in #1)"),
				normal(ReasonPhaseRunning, "Phase control-plane is running (approved by bob in #1)"),
			}},
		{name: "each phase by its own approval", prev: plan("cluster", succeeded, pending, pending),
			cur: with(plan("cluster", succeeded, approved, pending), func(st *status.PlanStatus) {
				st.Approve = "control-plane"
				st.ApprovedBy = append(st.ApprovedBy, status.Approval{Phase: "control-plane", By: "carol", Commit: "0123456789abcdef0123456789abcdef01234567"})
			}),
			want: []Event{normal(ReasonPhaseApproved, "Phase control-plane is approved (approved by carol in commit 0123456789ab)")}},
		{name: "no approver known", prev: plan("", pending, pending, pending),
			cur:  with(plan("", running, pending, pending), func(st *status.PlanStatus) { st.Approve = "cluster" }),
			want: []Event{normal(ReasonPhaseRunning, "Phase cluster is running")}},
		{name: "a step fails for good", prev: plan("cluster", running, pending, pending), cur: failing,
			want: []Event{
				warning(ReasonStepFailed, `Step kube: copy-secret Secret default/capi-quickstart-cloud-config of phase cluster failed: admission denied: "an outage"`),
				warning(ReasonPhaseFailed, `Phase cluster failed (approved by bob in #1): step cluster/copy-secret/secret/capi-quickstart-cloud-config failed: admission denied: "an outage"`),
			}},
		{name: "a failure already reported", prev: failing, cur: failing},
		{name: "a retried step runs again", prev: failing,
			cur: with(failing, func(st *status.PlanStatus) {
				st.Phases[0].State, st.Phases[0].Reason, st.Phases[0].Steps[0].State = running, "", status.StepRunning
			}),
			want: []Event{normal(ReasonPhaseRunning, "Phase cluster is running (approved by bob in #1)")}},
		{name: "blocked, with why", prev: plan("workers", succeeded, succeeded, running),
			cur: with(plan("workers", succeeded, succeeded, blocked), func(st *status.PlanStatus) {
				st.Phases[2].Reason = "health check: node capi-quickstart-md-0-wq8fz is NotReady"
			}),
			want: []Event{warning(ReasonPhaseBlocked, "Phase workers is blocked (approved by bob in #1): health check: node capi-quickstart-md-0-wq8fz is NotReady")}},
		{name: "a rollback starts", prev: plan("workers", succeeded, succeeded, succeeded), cur: rollback,
			want: []Event{normal(ReasonPhaseRollingBack, "Phase workers is rolling back (rollback to control-plane approved by alice in #7)")}},
		{name: "a rollback ends", prev: rollback, cur: with(rollback, func(st *status.PlanStatus) { st.Phases[2].State = rolledBack }),
			want: []Event{normal(ReasonPhaseRolledBack, "Phase workers was rolled back (rollback to control-plane approved by alice in #7)")}},
		{name: "approval moved backwards", prev: plan("control-plane", succeeded, running, pending),
			cur: with(plan("control-plane", succeeded, approved, pending), func(st *status.PlanStatus) {
				st.Phases[1].Reason = "stopped: approval moved backwards"
			}),
			want: []Event{normal(ReasonPhaseApproved, "Phase control-plane is approved (approved by bob in #1): stopped: approval moved backwards")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev := Marks{}
			if tc.prev != nil {
				prev = MarksOf(tc.prev)
			}
			if got := Transitions(prev, tc.cur); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Transitions:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestMessagesHoldNoCredentials: an executor's error that quotes a URL
// with credentials and a query string loses them, a registered secret
// quoted elsewhere is masked, and a long one is cut.
func TestMessagesHoldNoCredentials(t *testing.T) {
	redact.Register("events-registered-Pa55")
	st := plan("cluster", failed, pending, pending)
	st.Phases[0].Steps = []status.StepStatus{{Key: "cluster/probe/openstack/keystone", Executor: "openstack", Action: "probe", Target: "OpenStack keystone",
		State: status.StepFailed, LastError: "get https://admin:s3cret-token@keystone.example:5000/v3?token=query-s3cret: timeout; " +
			`400: {"echo": "events-registered-Pa55"} ` + strings.Repeat("x", 2000)}}
	for _, ev := range Transitions(Marks{}, st) {
		if strings.Contains(ev.Message, "s3cret") || strings.Contains(ev.Message, "admin:") || strings.Contains(ev.Message, "registered-Pa55") {
			t.Errorf("%s message holds the URL's credentials: %.120s", ev.Reason, ev.Message)
		}
		if len(ev.Message) > maxMessage {
			t.Errorf("%s message is %d bytes; want at most %d", ev.Reason, len(ev.Message), maxMessage)
		}
		if ev.Reason == ReasonStepFailed && !strings.Contains(ev.Message, "https://***@keystone.example:5000/v3?***: timeout") {
			t.Errorf("StepFailed message: %.200s", ev.Message)
		}
	}
}
