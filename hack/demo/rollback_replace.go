package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/testing/ostest"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// The replace rollback: the phases kept (spec.rollback.to and
// spec.approve), and the last phase migrated before the rollback, whose
// phases after replaceKeep it undoes.
const (
	replaceKeep       = "infrastructure"
	replaceRolledBack = "cutover"
)

// serversGoneWait is how long after the rollback the servers of the new
// pool may take to go from Nova (CAPO deletes them before the Machines
// go, so they are gone by then as a rule).
const serversGoneWait = 2 * time.Minute

// rollbackReplace is the rollback-replace scenario's run: the replace
// fixture migrated through replaceKeep, its servers recorded (before the
// workers phase built any), migrated on through replaceRolledBack, then
// rolled back to replaceKeep by a pull request; the checks are the
// cutover's promises over the whole run (the drain watch: the budget,
// no pod evicted twice, every probe answered), the old nodes schedulable
// again and without ferry's cordon mark, Nova's servers as they were
// after replaceKeep (none that ferry did not create touched, every one
// the workers phase built gone), and nothing left of the new pool's
// MachineDeployment, MachineSets and Machines.
func rollbackReplace(ctx context.Context, w *world) error {
	out, phases := w.out, w.sc.phases
	keep, last := slices.Index(phases, replaceKeep), slices.Index(phases, replaceRolledBack)
	if w.fx.drain == nil || keep < 0 || last < keep {
		return fmt.Errorf("scenario %s: not a replace fixture with phases %s and %s", w.sc.name, replaceKeep, replaceRolledBack)
	}
	began := time.Now()
	if _, err := w.approve(ctx, phases[:keep+1], true); err != nil {
		return err
	}
	kept, err := w.servers(ctx)
	if err != nil {
		return err
	}
	out.say("\n==> Nova's servers after %s, before %s builds any: %s", replaceKeep, phases[keep+1], serverNames(kept))
	if _, err := w.approve(ctx, phases[keep+1:last+1], true); err != nil {
		return err
	}
	out.say("\n==> the %d phases took %s through pull requests", last+1, time.Since(began).Round(time.Second))
	now, err := w.servers(ctx)
	if err != nil {
		return err
	}
	built := map[string]string{}
	for id, s := range now {
		if _, ok := kept[id]; !ok {
			built[id] = s
		}
	}
	pools, err := w.createdPools(ctx, phases[keep+1])
	if err != nil {
		return err
	}
	out.say("    the new pool: MachineDeployment %s; its servers: %s", strings.Join(pools, ", "), serverNames(built))

	began = time.Now()
	undone := phases[keep+1 : last+1]
	if err := w.rollbackPR(ctx, undo{approve: replaceKeep, to: replaceKeep, undone: undone}, true); err != nil {
		w.workloadDiagnosis(ctx)
		return err
	}
	out.say("\n==> the rollback of %s took %s", strings.Join(undone, " and "), time.Since(began).Round(time.Second))
	want := every(phases[:keep+1], status.PhaseSucceeded)
	maps.Copy(want, every(undone, status.PhaseRolledBack))
	if err := w.endStatus(ctx, want); err != nil {
		return err
	}

	out.say("\n==> checking what the rollback left: the cutover's promises over the whole run, the old nodes, Nova's servers, the new pool")
	d := w.fx.drain
	checks := []ostest.Check{d.budgetKept(), d.evictedOnce(),
		d.probeAnswered(len(d.f.OldNodes)+len(built), "one probe after each old node drained by the cutover and each new node drained by the rollback")}
	checks = append(checks, w.oldNodesBack(ctx), w.serversBack(ctx, kept, built), w.poolsGone(ctx, pools))
	answered, _ := d.f.CallsAnswered(ctx, d.caller)
	checks = append(checks, answered...)
	failed := 0
	for _, c := range checks {
		out.say("    %s", c)
		if !c.OK {
			failed++
		}
	}
	out.say("    %s", w.newNodesLeft(ctx))
	repeated, err := repeatedCreates(w.fx.cloud.Mgmt.AuditLog)
	if err != nil {
		return err
	}
	// The world's Secrets, for the secret scan; its lines, for a look.
	after, err := readWorld(ctx, w, true)
	if err != nil {
		return err
	}
	if _, err := w.saveLines("world-after.txt", after.lines); err != nil {
		return err
	}
	problems, err := w.effects(ctx, slices.Concat(repeated, after.repeated), after.secrets)
	if err != nil {
		return err
	}
	if failed > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d checks failed", failed, len(checks)))
	}
	return problemsErr(nil, problems)
}

// servers reads the fixture project's servers: each ID's name and status.
func (w *world) servers(ctx context.Context) (map[string]string, error) {
	list, err := w.fx.cloud.ProjectServers(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, s := range list {
		out[s.ID] = s.Name + " " + s.Status
	}
	return out, nil
}

// serverNames lists servers (ID to "name status") by name, or says there
// are none.
func serverNames(servers map[string]string) string {
	if len(servers) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Values(servers)), ", ")
}

// compareServers compares Nova's servers now with kept (those there
// before the workers phase) and built (those it built): the kept servers
// gone or changed, the built ones still there, and the servers in
// neither list.
func compareServers(kept, built, now map[string]string) (touched, left, stray []string) {
	for id, s := range kept {
		if now[id] != s {
			touched = append(touched, fmt.Sprintf("%s (%s) is now %q", s, id, now[id]))
		}
	}
	for id, s := range now {
		switch _, isKept := kept[id]; {
		case built[id] != "":
			left = append(left, s+" ("+id+")")
		case !isKept:
			stray = append(stray, s+" ("+id+")")
		}
	}
	slices.Sort(touched)
	slices.Sort(left)
	slices.Sort(stray)
	return touched, left, stray
}

// serversBack waits up to serversGoneWait for Nova's servers to be those
// kept again, and checks that they are: none of them touched, every one
// of built gone, no other.
func (w *world) serversBack(ctx context.Context, kept, built map[string]string) ostest.Check {
	c := ostest.Check{Name: "Nova servers back as after " + replaceKeep}
	var touched, left, stray []string
	ctx, cancel := context.WithTimeout(ctx, serversGoneWait)
	defer cancel()
	err := w.out.wait(ctx, "the new pool's servers to go from Nova", func() (bool, string) {
		now, err := w.servers(ctx)
		if err != nil {
			return false, err.Error()
		}
		touched, left, stray = compareServers(kept, built, now)
		return len(left) == 0, fmt.Sprintf("%d of %d left: %s", len(left), len(built), strings.Join(left, ", "))
	})
	c.OK = err == nil && len(touched)+len(left)+len(stray) == 0 && len(built) > 0
	c.Detail = fmt.Sprintf("compared with the %d servers after %s (%s): changed or gone %v; of the %d the workers phase built (%s) left %v; others %v%s",
		len(kept), replaceKeep, serverNames(kept), touched, len(built), serverNames(built), left, stray, errText(err))
	return c
}

// createdPools are the MachineDeployments ferry created in phase.
func (w *world) createdPools(ctx context.Context, phase string) ([]string, error) {
	var mds clusterv1.MachineDeploymentList
	if err := w.fx.cloud.Mgmt.Client.List(ctx, &mds, client.InNamespace("default"),
		client.MatchingLabels{observed.LabelCreatedBy: w.sc.cluster, observed.LabelPhase: phase}); err != nil {
		return nil, fmt.Errorf("list the MachineDeployments ferry created in phase %s: %w", phase, err)
	}
	var names []string
	for _, md := range mds.Items {
		names = append(names, md.Name)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no MachineDeployment labelled %s=%s, %s=%s", observed.LabelCreatedBy, w.sc.cluster, observed.LabelPhase, phase)
	}
	slices.Sort(names)
	return names, nil
}

// poolsGone checks that nothing is left of the MachineDeployments pools:
// neither they nor a MachineSet or Machine of theirs.
func (w *world) poolsGone(ctx context.Context, pools []string) ostest.Check {
	c := ostest.Check{Name: "new pool gone"}
	mgmt := w.fx.cloud.Mgmt.Client
	var left []string
	for _, md := range pools {
		var d clusterv1.MachineDeployment
		switch err := mgmt.Get(ctx, client.ObjectKey{Namespace: "default", Name: md}, &d); {
		case err == nil:
			left = append(left, "MachineDeployment "+md)
		case client.IgnoreNotFound(err) != nil:
			c.Detail = err.Error()
			return c
		}
		of := client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md}
		var sets clusterv1.MachineSetList
		var machines clusterv1.MachineList
		if err := mgmt.List(ctx, &sets, client.InNamespace("default"), of); err != nil {
			c.Detail = err.Error()
			return c
		}
		if err := mgmt.List(ctx, &machines, client.InNamespace("default"), of); err != nil {
			c.Detail = err.Error()
			return c
		}
		for _, s := range sets.Items {
			left = append(left, "MachineSet "+s.Name)
		}
		for _, m := range machines.Items {
			left = append(left, "Machine "+m.Name)
		}
	}
	c.OK = len(left) == 0
	c.Detail = fmt.Sprintf("MachineDeployment %s, its MachineSets and Machines deleted; left: %v", strings.Join(pools, ", "), left)
	return c
}

// oldNodesBack checks that the old nodes take pods again: none
// unschedulable, none with ferry's cordon mark.
func (w *world) oldNodesBack(ctx context.Context) ostest.Check {
	d := w.fx.drain
	c := ostest.Check{Name: "old nodes schedulable"}
	var bad []string
	for _, name := range d.f.OldNodes {
		var n corev1.Node
		if err := d.f.Workload.Client.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		if n.Spec.Unschedulable {
			bad = append(bad, name+" cordoned")
		}
		if by, ok := n.Annotations[observed.AnnotationCordonedBy]; ok {
			bad = append(bad, fmt.Sprintf("%s still marked %s=%s", name, observed.AnnotationCordonedBy, by))
		}
	}
	c.OK = len(bad) == 0
	c.Detail = fmt.Sprintf("old nodes %s: uncordoned, without ferry's mark %s; %v", strings.Join(d.f.OldNodes, ", "), observed.AnnotationCordonedBy, bad)
	return c
}

// newNodesLeft says which of the new servers' Nodes the workload cluster
// still has, for a look: the Machine controller deletes a Machine's Node
// when it deletes the Machine, but the boot stand-in's hollow kubelet may
// register it again (not a check: the kubelet is a stand-in).
func (w *world) newNodesLeft(ctx context.Context) string {
	var left []string
	for _, name := range w.fx.drain.f.Booted() {
		var n corev1.Node
		if err := w.fx.drain.f.Workload.Client.Get(ctx, client.ObjectKey{Name: name}, &n); err == nil {
			left = append(left, fmt.Sprintf("%s (unschedulable %t)", name, n.Spec.Unschedulable))
		}
	}
	if len(left) == 0 {
		return "· the new servers' Nodes are gone from the workload cluster"
	}
	return "· the workload cluster still has Nodes of the new servers (the boot stand-in's hollow kubelets run on): " + strings.Join(left, ", ")
}

// workloadDiagnosis prints what a rollback that did not end leaves in the
// workload cluster, where a drain waits: every Node (schedulable or not,
// Ready or not), every pod that is not a DaemonSet's (its node, phase,
// readiness and whether it is terminating), the PodDisruptionBudgets'
// allowed disruptions, and the executor's last drain lines. CI keeps this
// output, not the logs.
func (w *world) workloadDiagnosis(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	k, out := w.fx.drain.f.Workload, w.out
	out.say("\n==> the workload cluster as the rollback left it")
	var nodes corev1.NodeList
	if err := k.Client.List(ctx, &nodes); err != nil {
		out.say("    Nodes: %v", err)
	}
	for _, n := range nodes.Items {
		ready := "unknown"
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = string(c.Status) + " " + c.Reason
			}
		}
		out.say("    Node %s: unschedulable %t, Ready %s", n.Name, n.Spec.Unschedulable, ready)
	}
	var pods corev1.PodList
	if err := k.Client.List(ctx, &pods); err != nil {
		out.say("    pods: %v", err)
	}
	for _, p := range pods.Items {
		if owner := metav1.GetControllerOf(&p); owner != nil && owner.Kind == "DaemonSet" {
			continue
		}
		gone := ""
		if p.DeletionTimestamp != nil {
			gone = ", terminating since " + p.DeletionTimestamp.Format(time.TimeOnly)
		}
		out.say("    pod %s/%s on %q: %s, healthy %t%s", p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase, testenv.Healthy(&p), gone)
	}
	var pdbs policyv1.PodDisruptionBudgetList
	if err := k.Client.List(ctx, &pdbs); err != nil {
		out.say("    PodDisruptionBudgets: %v", err)
	}
	for _, b := range pdbs.Items {
		out.say("    PodDisruptionBudget %s/%s: %d healthy of %d desired, %d disruptions allowed",
			b.Namespace, b.Name, b.Status.CurrentHealthy, b.Status.DesiredHealthy, b.Status.DisruptionsAllowed)
	}
	logs, _ := filepath.Glob(filepath.Join(w.logDir, "*.log"))
	var drains []string
	for _, name := range logs {
		data, err := os.ReadFile(name)
		if err != nil || filepath.Base(name) == "gitea.log" {
			continue
		}
		for line := range strings.Lines(string(data)) {
			if strings.Contains(line, "drain") && !strings.Contains(line, "publishing step") {
				drains = append(drains, strings.TrimSpace(line))
			}
		}
	}
	slices.Sort(drains) // each begins time=<RFC 3339>: in time order
	out.say("    the executor's last drain lines:")
	for _, line := range drains[max(0, len(drains)-15):] {
		out.say("    %s", line)
	}
}
