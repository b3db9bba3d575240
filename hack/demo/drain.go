package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/reconciler"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/ostest"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// drainWatch follows the replace scenario's cutover on the workload
// cluster: whether an old node is being drained, the fewest healthy web
// replicas, the evictions, the cordoned nodes, the probe's answers and
// the caller's counts.
type drainWatch struct {
	f      *ostest.Replaceable
	probe  *testenv.Probe
	caller *testenv.Caller
	// least stops the count of healthy web replicas and returns the
	// fewest seen.
	least func() int
	// reader and plan read the plan's status (newWorld sets them).
	reader reconciler.GitStatusStore
	plan   string
	// node is the old node a chaos run found being drained.
	node string
}

// draining returns an old node that is cordoned and still runs a pod a
// drain evicts (one not of a DaemonSet), or "" when there is none: the
// moment a cutover drain runs.
func (d *drainWatch) draining(ctx context.Context) string {
	for _, name := range d.f.OldNodes {
		if cordoned, toEvict, err := d.f.Workload.DrainState(ctx, name); err == nil && cordoned && toEvict > 0 {
			return name
		}
	}
	return ""
}

// waitDraining polls every 50 ms until an old node is being drained, and
// returns it.
func (d *drainWatch) waitDraining(ctx context.Context) (string, error) {
	for {
		if node := d.draining(ctx); node != "" {
			return node, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for a cutover drain: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// checks are what the cutover must have kept and left: the budget never
// violated, no pod evicted twice, no node left cordoned that the plan did
// not finish draining, the probe answered, the old pool gone and the new
// nodes joined.
func (d *drainWatch) checks(ctx context.Context) []ostest.Check {
	checks := []ostest.Check{d.budgetKept(), d.evictedOnce()}
	add := func(name string, ok bool, format string, args ...any) {
		checks = append(checks, ostest.Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	}
	stray, err := d.strayCordons(ctx)
	add("no stray cordon", err == nil && len(stray) == 0, "cordoned nodes whose drain the plan did not finish: %v%s", stray, errText(err))
	checks = append(checks, d.probeAnswered(len(d.f.OldNodes), "one probe after each old node"))
	gone, err := d.oldPoolGone(ctx)
	add("old pool gone", err == nil && gone == "", "old MachineDeployment %s, its Machines and Nodes deleted%s%s", d.f.OldMD, gone, errText(err))
	booted := d.f.Booted()
	add("new nodes joined", len(booted) == replaceWorkers, "%d new nodes on servers the real CAPO built: %s", len(booted), strings.Join(booted, ", "))
	checks = append(checks, d.f.CallsKept(ctx, d.caller)...)
	return checks
}

// budgetKept checks that at least 2 of the 3 web replicas were healthy
// at every moment from the fixture's start until now.
func (d *drainWatch) budgetKept() ostest.Check {
	least := d.least()
	return ostest.Check{Name: "budget kept", OK: least >= 2,
		Detail: fmt.Sprintf("at least %d of 3 web replicas healthy at every moment of the run (PodDisruptionBudget web allows one disruption)", least)}
}

// evictedOnce checks that the workload API server's audit log shows no
// pod evicted twice.
func (d *drainWatch) evictedOnce() ostest.Check {
	counts, err := d.f.Workload.Evictions()
	twice := evictedTwice(counts)
	return ostest.Check{Name: "no pod evicted twice", OK: err == nil && len(twice) == 0,
		Detail: fmt.Sprintf("%d evictions of %d pods through the eviction API; evicted more than once: %v%s", sum(counts), len(counts), twice, errText(err))}
}

// probeAnswered checks that every request to the probe got 200, and that
// there were at least least of them (which says).
func (d *drainWatch) probeAnswered(least int, which string) ostest.Check {
	ok, all := d.probe.Answered()
	return ostest.Check{Name: "probe answered", OK: ok == all && ok >= least,
		Detail: fmt.Sprintf("the application's URL answered 200 %d times of %d (%s)", ok, all, which)}
}

// evictedTwice lists the pods evicted more than once, with how often.
func evictedTwice(counts map[string]int) []string {
	var out []string
	for pod, n := range counts {
		if n > 1 {
			out = append(out, fmt.Sprintf("pod %s evicted %d times", pod, n))
		}
	}
	sort.Strings(out)
	return out
}

func sum(counts map[string]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return "; " + err.Error()
}

// strayCordons lists the cordoned nodes that are not old nodes whose drain
// step succeeded.
func (d *drainWatch) strayCordons(ctx context.Context) ([]string, error) {
	st, err := d.reader.Read(ctx, d.plan)
	if err != nil {
		return nil, fmt.Errorf("read the status: %w", err)
	}
	drained := map[string]bool{}
	for _, ph := range st.Phases {
		for _, s := range ph.Steps {
			fields := strings.Fields(s.Target)
			if s.Action == step.Drain && s.State == status.StepSucceeded && len(fields) > 0 {
				drained[fields[len(fields)-1]] = true
			}
		}
	}
	var nodes corev1.NodeList
	if err := d.f.Workload.Client.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("list the workload cluster's nodes: %w", err)
	}
	var stray []string
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable && (!slices.Contains(d.f.OldNodes, n.Name) || !drained[n.Name]) {
			stray = append(stray, n.Name)
		}
	}
	return stray, nil
}

// oldPoolGone says what is left of the old pool ("" when nothing is).
func (d *drainWatch) oldPoolGone(ctx context.Context) (string, error) {
	var left []string
	var machines clusterv1.MachineList
	if err := d.f.Mgmt.Client.List(ctx, &machines, client.InNamespace("default"), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: d.f.OldMD}); err != nil {
		return "", err
	}
	for _, m := range machines.Items {
		left = append(left, "Machine "+m.Name)
	}
	var md clusterv1.MachineDeployment
	if err := d.f.Mgmt.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: d.f.OldMD}, &md); err == nil {
		left = append(left, "MachineDeployment "+md.Name)
	}
	for _, name := range d.f.OldNodes {
		var n corev1.Node
		if err := d.f.Workload.Client.Get(ctx, client.ObjectKey{Name: name}, &n); err == nil {
			left = append(left, "Node "+name)
		}
	}
	if len(left) == 0 {
		return "", nil
	}
	return "; left: " + strings.Join(left, ", "), nil
}

// capture adds the cutover's figures to a chaos run's end state: a pod
// evicted twice is a repeated effect; a broken budget, a stray cordon, a
// probe that failed or an old pool left are violations.
func (d *drainWatch) capture(ctx context.Context, st *endState) {
	counts, err := d.f.Workload.Evictions()
	if err != nil {
		st.violations = append(st.violations, err.Error())
	}
	st.repeated = append(st.repeated, evictedTwice(counts)...)
	for _, c := range d.checks(ctx) {
		if !c.OK && c.Name != "no pod evicted twice" {
			st.violations = append(st.violations, c.String())
		}
	}
}
