//go:build openstack

package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/reconciler"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// migration drives one plan through pull requests on a real Gitea, as a
// team does, against a running `reconciler run --forge gitea`: each pull
// request approves a phase, is previewed, merged through Gitea's API with
// the migration's merge style, and its phase waited for on the status
// branch and in the progress comment. Every wait ends at once when the
// reconciler exits, and fails with the last thing it saw and the end of
// the reconciler's log.
type migration struct {
	t      *testing.T
	ctx    context.Context
	r      *running
	gt     *testenv.Gitea
	style  string // how pull requests are merged: testenv.MergeCommit, …
	reader reconciler.GitStatusStore
	plan   string // the plan's name: plans/<plan>.yaml
	pr     int    // the last pull request opened
	branch string // its branch
	// layout is the distributed layout the migration runs on, nil when
	// it runs on one `reconciler run`; r is then its leader.
	layout *clustered
	// installed is ferry installed from deploy/ in the management
	// cluster, when the migration runs in its pod; r is then nil.
	installed *testenv.Installed
}

// startMigration starts Gitea with files in its plans repository and
// `reconciler run` on it (startRunOnGitea, extra flags last), on the
// management cluster mgmt, for plan, merging with style.
func startMigration(t *testing.T, ctx context.Context, mgmt *testenv.Kube, plan, style string, files map[string]string, extra ...string) *migration {
	t.Helper()
	gt, r, reader := startRunOnGitea(t, ctx, mgmt, nil, files, extra...)
	return &migration{t: t, ctx: ctx, r: r, gt: gt, style: style, reader: reader, plan: plan}
}

// startClusteredMigration is startMigration on the distributed layout
// (startClusteredOnGitea).
func startClusteredMigration(t *testing.T, ctx context.Context, mgmt *testenv.Kube, plan, style string, files map[string]string, extra ...string) *migration {
	t.Helper()
	gt, c, reader := startClusteredOnGitea(t, ctx, mgmt, nil, files, extra...)
	return &migration{t: t, ctx: ctx, r: c.leader, layout: c, gt: gt, style: style, reader: reader, plan: plan}
}

// startInstalledMigration is startMigration with ferry installed from
// deploy/ in mgmt as docs/install.md says (testenv.Install), its pod on
// nodes, Gitea on host (the nodes' network's host address), and Gitea's
// webhooks to the pod.
func startInstalledMigration(t *testing.T, ctx context.Context, mgmt *testenv.Kube, nodes *testenv.RealNodes, host, plan, style string, files map[string]string) *migration {
	t.Helper()
	gt, _, reader := giteaForRunOn(t, files, host)
	m := &migration{t: t, ctx: ctx, gt: gt, style: style, reader: reader, plan: plan,
		installed: testenv.Install(t, ctx, mgmt, nodes, gt, "default")}
	m.hookPod()
	return m
}

// hookPod waits until the installed layout's reconciler pods serve and
// points a Gitea webhook at one of them, as an ingress would (a standby
// passes a webhook on to the leader).
func (m *migration) hookPod() {
	m.t.Helper()
	pod := m.installed.Serving(m.ctx)[0]
	m.gt.AddWebhook(m.t, "http://"+pod.Status.PodIP+":9090/", m.installed.WebhookSecret)
}

// mergeDeleting merges the last pull request as merger, which approves
// phase, and once the status shows the approval taken up deletes a pod
// of app: the leading reconciler's (the Lease's holder), or the executor
// that logged a step last. The Deployment makes another; the phases must
// reach want and the progress comment show phase Succeeded. It returns
// the merge commit.
func (m *migration) mergeDeleting(phase, merger, app string, want map[string]status.PhaseState) string {
	m.t.Helper()
	sha := m.mergePR(merger)
	st := m.until(phase+"'s approval taken up", func(st *status.PlanStatus) bool {
		return slices.ContainsFunc(st.ApprovedBy, func(a status.Approval) bool { return a.Commit == sha })
	})
	victim := m.victim(app)
	m.t.Logf("deleting pod %s during phase %s; phases then: %s", victim, phase, phaseStates(st))
	m.installed.Kubectl(m.ctx, "-n", "ferry-system", "delete", "pod", victim, "--wait=false")
	m.wait("pod "+victim+" gone", func() bool {
		return !slices.ContainsFunc(m.installed.Pods(m.ctx, app), func(p corev1.Pod) bool { return p.Name == victim })
	}, func() string { return "" })
	m.hookPod()
	m.until(fmt.Sprintf("phases %v", want), func(st *status.PlanStatus) bool { return phasesAre(st, want) })
	m.comment(m.pr, "progress/"+m.plan, "| "+phase+" | Succeeded |")
	return sha
}

// victim is the pod of app mergeDeleting deletes.
func (m *migration) victim(app string) string {
	m.t.Helper()
	pods := m.installed.Pods(m.ctx, app)
	if len(pods) == 0 {
		m.t.Fatalf("no pod of %s to delete", app)
	}
	if app == testenv.ReconcilerApp {
		var lease coordinationv1.Lease
		if err := m.installed.Client().Get(m.ctx, client.ObjectKey{Namespace: "ferry-system", Name: "ferry-reconciler"}, &lease); err != nil {
			m.t.Fatalf("the reconcilers' Lease: %v", err)
		}
		return ptr.Deref(lease.Spec.HolderIdentity, "")
	}
	latest, name := "", pods[0].Name
	for _, p := range pods {
		for _, l := range strings.Split(m.installed.Log(p.Name, "executor"), "\n") {
			if strings.Contains(l, "running step") && l > latest {
				latest, name = l, p.Name
			}
		}
	}
	return name
}

// handOver, on the distributed layout, stops the leading reconciler as a
// rolling update would; the standby takes over the migration.
func (m *migration) handOver() {
	m.t.Helper()
	m.r = m.layout.handOver()
}

func (m *migration) path() string { return "plans/" + m.plan + ".yaml" }

// open opens the next pull request, by alice, with the plan's content,
// and returns its preview once it lists the steps of phase.
func (m *migration) open(title, phase, content string) string {
	m.t.Helper()
	m.openPR(title, content)
	return m.comment(m.pr, "preview", "Steps of phase "+phase+":")
}

// openPR pushes the plan's content to a new branch as alice and opens a
// pull request from it.
func (m *migration) openPR(title, content string) {
	m.t.Helper()
	m.branch = fmt.Sprintf("pr-%d-%s", m.pr+1, strings.ReplaceAll(strings.ToLower(title), " ", "-"))
	m.gt.PushBranch(m.t, testenv.GiteaMaintainer, m.branch, title, map[string]string{m.path(): content})
	m.pr = m.gt.OpenPullRequest(m.t, testenv.GiteaMaintainer, m.branch, title)
}

// push adds a commit with the plan's content to the last pull request.
func (m *migration) push(msg, content string) {
	m.t.Helper()
	m.gt.PushBranch(m.t, testenv.GiteaMaintainer, m.branch, msg, map[string]string{m.path(): content})
}

// mergePR merges the last pull request as merger with the migration's
// style and returns the commit it wrote on main.
func (m *migration) mergePR(merger string) string {
	m.t.Helper()
	return m.gt.MergePullRequest(m.t, merger, m.pr, m.style)
}

// merge merges the last pull request as merger, which approves phase:
// it waits until the status credits the merger with the merge and the
// phases are in the states of want, and for the progress comment to show
// phase Succeeded; it returns the status and the merge commit.
func (m *migration) merge(phase, merger string, want map[string]status.PhaseState) (*status.PlanStatus, string) {
	m.t.Helper()
	sha := m.mergePR(merger)
	approval := status.Approval{Phase: phase, By: merger, PR: m.pr, Commit: sha}
	st := m.until(fmt.Sprintf("%+v and phases %v", approval, want), func(st *status.PlanStatus) bool {
		return slices.ContainsFunc(st.ApprovedBy, func(a status.Approval) bool { return approvedAs(a, approval) }) && phasesAre(st, want)
	})
	m.comment(m.pr, "progress/"+m.plan, "| "+phase+" | Succeeded |")
	return st, sha
}

// approve opens a pull request that approves phase with content and
// merges it as bob, with merge's waits.
func (m *migration) approve(phase, content string, want map[string]status.PhaseState) *status.PlanStatus {
	m.t.Helper()
	m.open("Approve "+phase, phase, content)
	st, _ := m.merge(phase, testenv.GiteaReviewer, want)
	return st
}

// phases waits until the plan's phases on the status branch are in the
// states of want, and returns that status.
func (m *migration) phases(want map[string]status.PhaseState) *status.PlanStatus {
	m.t.Helper()
	return m.until(fmt.Sprintf("phases %v", want), func(st *status.PlanStatus) bool { return phasesAre(st, want) })
}

// until waits until the plan's status on the status branch satisfies
// cond, and returns it.
func (m *migration) until(what string, cond func(*status.PlanStatus) bool) *status.PlanStatus {
	m.t.Helper()
	var st *status.PlanStatus
	m.wait(what, func() bool {
		var err error
		st, err = m.reader.Read(m.ctx, m.plan)
		return err == nil && cond(st)
	}, func() string {
		if st == nil {
			return "no status read"
		}
		got := []string{fmt.Sprintf("approved by %+v", st.ApprovedBy)}
		for _, p := range st.Phases {
			got = append(got, fmt.Sprintf("%s %s (%s)", p.Name, p.State, p.Reason))
		}
		return "last: " + strings.Join(got, "; ")
	})
	return st
}

// comment waits for a comment on pull request pr with the marker of key
// that contains want, and returns it.
func (m *migration) comment(pr int, key, want string) string {
	m.t.Helper()
	var body string
	m.wait(fmt.Sprintf("a %s comment on #%d with %q", key, pr, want), func() bool {
		for _, c := range m.gt.Comments(m.t, pr) {
			if strings.HasPrefix(c.Body, forge.Marker(key)) {
				body = c.Body
				if strings.Contains(c.Body, want) {
					return true
				}
			}
		}
		return false
	}, func() string { return "the last one:\n" + body })
	return body
}

// successStatuses waits for n success commit statuses of the plan's
// phases on commit sha.
func (m *migration) successStatuses(sha string, n int) {
	m.t.Helper()
	var last []testenv.GiteaStatus
	m.wait(fmt.Sprintf("%d success statuses for the phases on %s", n, sha), func() bool {
		last = m.gt.Statuses(m.t, sha)
		success := 0
		for _, s := range last {
			if s.Status == forge.StateSuccess && strings.HasPrefix(s.Context, "ferry/"+m.plan+"/") {
				success++
			}
		}
		return success >= n
	}, func() string { return fmt.Sprintf("statuses: %+v", last) })
}

// wait polls done until it holds; when the reconciler exits or ctx ends
// first, it fails the test with what and last's account of the state.
func (m *migration) wait(what string, done func() bool, last func() string) {
	m.t.Helper()
	var exited chan struct{} // never closed when ferry runs in pods
	if m.r != nil {
		exited = m.r.exited
	}
	for m.ctx.Err() == nil {
		if done() {
			return
		}
		select {
		case <-exited:
			m.r.fatalf("reconciler run exited %d while waiting for %s; %s%s", m.r.code, what, last(), m.otherLogs())
		case <-time.After(200 * time.Millisecond):
		}
	}
	if m.r == nil {
		m.t.Fatalf("timed out waiting for %s; %s%s", what, last(), m.otherLogs())
	}
	m.r.fatalf("timed out waiting for %s; %s%s", what, last(), m.otherLogs())
}

// otherLogs is, on the distributed layout, the end of every process's
// log; installed, the end of every reconciler pod's.
func (m *migration) otherLogs() string {
	switch {
	case m.installed != nil:
		return "\nthe reconciler's pods:\n" + m.installed.Logs(context.Background())
	case m.layout != nil:
		return "\nthe layout's logs:\n" + m.layout.logs()
	}
	return ""
}
