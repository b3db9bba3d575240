package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Report is one invocation's figures, as the JSON file holds them: a run
// per layout that --layout asked for, and what the cluster layout cost
// over the single one when both ran.
type Report struct {
	Runs []*Result `json:"runs"`
	// ClusterCost is nil unless both layouts ran (--layout cluster).
	ClusterCost *LayoutCost `json:"clusterCost,omitempty"`
}

// Result is one run's figures.
type Result struct {
	// Layout is how ferry's processes ran: single or cluster.
	Layout string `json:"layout"`
	// NATSReplicas is how many copies the NATS servers kept of the steps
	// and results streams; ExecutorReplicas how many `reconciler executor`
	// processes ran (0: the executors ran in the reconciler's process).
	NATSReplicas     int     `json:"natsReplicas"`
	ExecutorReplicas int     `json:"executorReplicas"`
	Plans            int     `json:"plans"`
	StepsPerPlan     float64 `json:"stepsPerPlan"`
	Steps            int     `json:"steps"`
	WallSeconds      float64 `json:"wallSeconds"`
	StepsPerSecond   float64 `json:"stepsPerSecond"`
	// The step latency is a step's round trip, from its publication to its
	// final result (ferry_step_latency_seconds).
	LatencyP50 float64 `json:"stepLatencyP50Seconds"`
	LatencyP95 float64 `json:"stepLatencyP95Seconds"`
	LatencyP99 float64 `json:"stepLatencyP99Seconds"`
	// KubePerStep counts the management API requests of the reconciler's
	// client, which the executors share only when they run in its process.
	KubePerStep     float64 `json:"managementRequestsPerStep"`
	WorkloadPerStep float64 `json:"workloadRequestsPerStep"`
	GitFetches      float64 `json:"gitFetches"`
	GitPushes       float64 `json:"gitPushes"`
	GitHubPerPlan   float64 `json:"githubCallsPerPlan"`
	CloudPerPlan    float64 `json:"openstackCallsPerPlan"`
	// PeakRSSMiB is the reconciler's; ExecutorPeakRSSMiB each executor
	// replica's, in order.
	PeakRSSMiB         float64   `json:"peakRSSMiB"`
	ExecutorPeakRSSMiB []float64 `json:"executorPeakRSSMiB,omitempty"`
	// MemoryLimitMiB is each process's GOMEMLIMIT (--container-memory), 0
	// for none.
	MemoryLimitMiB float64 `json:"memoryLimitMiB,omitempty"`
	// CPUSeconds is the reconciler's during the migration (with the
	// embedded NATS server's and the executors' in the single layout);
	// ExecutorCPUSeconds the executor replicas' together. The NATS cluster
	// runs in the benchmark's process and is in neither.
	CPUSeconds         float64 `json:"cpuSeconds"`
	ExecutorCPUSeconds float64 `json:"executorCPUSeconds,omitempty"`
	// BenchCPUSeconds is the benchmark's own process's during the
	// migration: the stand-ins, the Git server and the status reader,
	// whose work is the same in both layouts, and the NATS cluster in the
	// cluster layout. The API servers run apart and are in no figure.
	BenchCPUSeconds float64 `json:"benchmarkCPUSeconds"`
	Idle            Idle    `json:"idle"`
	// Baseline is nil when the run had none (--baseline-plans 0, and the
	// cluster layout's run).
	Baseline *Baseline `json:"baseline,omitempty"`
}

// Idle is the cost of one poll interval with nothing changing.
type Idle struct {
	IntervalSeconds float64 `json:"intervalSeconds"`
	CPUSeconds      float64 `json:"cpuSecondsPerInterval"`
	CorePercent     float64 `json:"percentOfOneCore"`
	// ExecutorCPUSeconds is the executor replicas' together.
	ExecutorCPUSeconds float64 `json:"executorCPUSecondsPerInterval,omitempty"`
	KubeRequests       float64 `json:"managementRequestsPerInterval"`
	WorkloadRequests   float64 `json:"workloadRequestsPerInterval"`
	GitLsRemotes       float64 `json:"gitLsRemotesPerInterval"`
	GitFetches         float64 `json:"gitFetchesPerInterval"`
	GitHubCalls        float64 `json:"githubCallsPerInterval"`
	CloudCalls         float64 `json:"openstackCallsPerInterval"`
}

// LayoutCost is what the cluster layout (replicated streams on a NATS
// cluster, executors in processes of their own) costs per step over the
// single one (one copy of each stream, executors in the reconciler), from
// the two runs of one invocation. Ratios are the cluster run's figure over
// the single run's; Extra fields the difference, in milliseconds.
type LayoutCost struct {
	// Wall time per step is the inverse of steps per second: what a step
	// costs the fleet's migration, with many steps running at once.
	WallMsPerStep      [2]float64 `json:"wallMsPerStep"`
	WallPerStepRatio   float64    `json:"wallPerStepRatio"`
	ExtraWallMsPerStep float64    `json:"extraWallMsPerStep"`
	// A step's round trip, publication to result, at the median and the
	// 95th percentile: what a step costs its plan.
	RoundTripP50Ratio   float64 `json:"roundTripP50Ratio"`
	ExtraRoundTripP50Ms float64 `json:"extraRoundTripP50Ms"`
	RoundTripP95Ratio   float64 `json:"roundTripP95Ratio"`
	ExtraRoundTripP95Ms float64 `json:"extraRoundTripP95Ms"`
	// CPU per step counts ferry's processes and the benchmark's, which
	// holds the NATS cluster in the cluster layout and does the same work
	// besides in both: the difference is ferry's and NATS's.
	CPUMsPerStep      [2]float64 `json:"cpuMsPerStep"`
	CPUPerStepRatio   float64    `json:"cpuPerStepRatio"`
	ExtraCPUMsPerStep float64    `json:"extraCPUMsPerStep"`
}

// layoutCost compares a cluster run with a single one.
func layoutCost(single, cluster *Result) *LayoutCost {
	perStep := func(r *Result, v float64) float64 { return 1000 * v / float64(r.Steps) }
	wall := func(r *Result) float64 { return perStep(r, r.WallSeconds) }
	cpu := func(r *Result) float64 { return perStep(r, r.CPUSeconds+r.ExecutorCPUSeconds+r.BenchCPUSeconds) }
	s, c := wall(single), wall(cluster)
	sc, cc := cpu(single), cpu(cluster)
	return &LayoutCost{
		WallMsPerStep: [2]float64{s, c}, WallPerStepRatio: c / s, ExtraWallMsPerStep: c - s,
		CPUMsPerStep: [2]float64{sc, cc}, CPUPerStepRatio: cc / sc, ExtraCPUMsPerStep: cc - sc,
		RoundTripP50Ratio: cluster.LatencyP50 / single.LatencyP50, ExtraRoundTripP50Ms: 1000 * (cluster.LatencyP50 - single.LatencyP50),
		RoundTripP95Ratio: cluster.LatencyP95 / single.LatencyP95, ExtraRoundTripP95Ms: 1000 * (cluster.LatencyP95 - single.LatencyP95),
	}
}

// describe says how a run's processes ran, for the table's head.
func (r *Result) describe() string {
	if r.ExecutorReplicas == 0 {
		return fmt.Sprintf("%s: R%d, executors in process", r.Layout, r.NATSReplicas)
	}
	return fmt.Sprintf("%s: R%d, %d executor processes", r.Layout, r.NATSReplicas, r.ExecutorReplicas)
}

// printTable prints the runs side by side, one column each, then the
// cluster layout's cost when there is one.
func printTable(w io.Writer, rep *Report) {
	type row struct {
		label string
		value func(*Result) string
	}
	mib := func(v float64) string { return fmt.Sprintf("%.0f MiB", v) }
	rows := []row{
		{"layout", (*Result).describe},
		{"plans", func(r *Result) string { return strconv.Itoa(r.Plans) }},
		{"steps (per plan)", func(r *Result) string { return fmt.Sprintf("%d (%.1f)", r.Steps, r.StepsPerPlan) }},
		{"wall time, approval to last step", func(r *Result) string { return fmt.Sprintf("%.1f s", r.WallSeconds) }},
		{"steps per second", func(r *Result) string { return fmt.Sprintf("%.1f", r.StepsPerSecond) }},
		{"step latency p50 / p95 / p99 (publication to result)", func(r *Result) string {
			return fmt.Sprintf("%.3f / %.3f / %.3f s", r.LatencyP50, r.LatencyP95, r.LatencyP99)
		}},
		{"management API requests per step (reconciler's client)", func(r *Result) string {
			if r.ExecutorReplicas > 0 {
				return fmt.Sprintf("%.1f (without the executors')", r.KubePerStep)
			}
			return fmt.Sprintf("%.1f", r.KubePerStep)
		}},
		{"workload API requests per step", func(r *Result) string { return fmt.Sprintf("%.1f", r.WorkloadPerStep) }},
		{"Git fetches / pushes", func(r *Result) string { return fmt.Sprintf("%.0f / %.0f", r.GitFetches, r.GitPushes) }},
		{"GitHub API calls per plan", func(r *Result) string { return fmt.Sprintf("%.1f", r.GitHubPerPlan) }},
		{"OpenStack API calls per plan", func(r *Result) string { return fmt.Sprintf("%.1f", r.CloudPerPlan) }},
		{"GOMEMLIMIT of each process", func(r *Result) string {
			if r.MemoryLimitMiB == 0 {
				return "none"
			}
			return mib(r.MemoryLimitMiB)
		}},
		{"reconciler peak RSS", func(r *Result) string { return mib(r.PeakRSSMiB) }},
		{"executors' peak RSS, each", func(r *Result) string {
			if len(r.ExecutorPeakRSSMiB) == 0 {
				return "in the reconciler"
			}
			each := make([]string, len(r.ExecutorPeakRSSMiB))
			for i, v := range r.ExecutorPeakRSSMiB {
				each[i] = fmt.Sprintf("%.0f", v)
			}
			return strings.Join(each, " / ") + " MiB"
		}},
		{"CPU during the migration: reconciler / executors", func(r *Result) string {
			if r.ExecutorReplicas == 0 {
				return fmt.Sprintf("%.1f s (with executors and NATS)", r.CPUSeconds)
			}
			return fmt.Sprintf("%.1f s / %.1f s", r.CPUSeconds, r.ExecutorCPUSeconds)
		}},
		{"CPU of the benchmark's process (stand-ins, NATS cluster)", func(r *Result) string {
			return fmt.Sprintf("%.1f s", r.BenchCPUSeconds)
		}},
		{"idle, per poll interval: CPU", func(r *Result) string {
			s := fmt.Sprintf("%.2f s in %.0f s (%.2f%% of a core)", r.Idle.CPUSeconds, r.Idle.IntervalSeconds, r.Idle.CorePercent)
			if r.ExecutorReplicas > 0 {
				s += fmt.Sprintf(", executors %.2f s", r.Idle.ExecutorCPUSeconds)
			}
			return s
		}},
		{"idle: management / workload API requests", func(r *Result) string {
			return fmt.Sprintf("%.0f / %.0f", r.Idle.KubeRequests, r.Idle.WorkloadRequests)
		}},
		{"idle: Git ls-remotes / fetches", func(r *Result) string {
			return fmt.Sprintf("%.0f / %.0f", r.Idle.GitLsRemotes, r.Idle.GitFetches)
		}},
		{"idle: GitHub / OpenStack calls", func(r *Result) string {
			return fmt.Sprintf("%.0f / %.0f", r.Idle.GitHubCalls, r.Idle.CloudCalls)
		}},
	}
	baseline := func(label string, value func(r *Result, b *Baseline) string) row {
		return row{label, func(r *Result) string {
			if r.Baseline == nil {
				return "-"
			}
			return value(r, r.Baseline)
		}}
	}
	if slices.ContainsFunc(rep.Runs, func(r *Result) bool { return r.Baseline != nil }) {
		rows = append(rows,
			baseline("kubectl baseline: plans (scripts at once)", func(_ *Result, b *Baseline) string { return fmt.Sprintf("%d (%d)", b.Plans, b.Parallel) }),
			baseline("baseline wall time, first script to last", func(_ *Result, b *Baseline) string { return fmt.Sprintf("%.1f s", b.WallSeconds) }),
			baseline("seconds per plan: ferry / baseline", func(r *Result, b *Baseline) string {
				return fmt.Sprintf("%.3f s / %.3f s", r.WallSeconds/float64(r.Plans), b.SecondsPerPlan)
			}),
			baseline("baseline kubectl processes (per plan)", func(_ *Result, b *Baseline) string {
				return fmt.Sprintf("%d (%.1f)", b.KubectlProcesses, float64(b.KubectlProcesses)/float64(b.Plans))
			}),
			baseline("baseline CPU of the scripts (kubectl and shell)", func(_ *Result, b *Baseline) string { return fmt.Sprintf("%.1f s", b.KubectlCPUSeconds) }),
			baseline("ferry's time over the baseline's", func(_ *Result, b *Baseline) string {
				return fmt.Sprintf("%.2f (%.1fx faster)", 1/b.FerrySpeedup, b.FerrySpeedup)
			}),
		)
	}
	cells := make([][]string, len(rows))
	widths := make([]int, len(rep.Runs)+1)
	for i, rw := range rows {
		cells[i] = []string{rw.label}
		for _, r := range rep.Runs {
			cells[i] = append(cells[i], rw.value(r))
		}
		for j, c := range cells[i] {
			widths[j] = max(widths[j], len(c))
		}
	}
	for _, line := range cells {
		for j, c := range line {
			if j == len(line)-1 {
				fmt.Fprintln(w, c)
			} else {
				fmt.Fprintf(w, "%-*s  ", widths[j], c)
			}
		}
	}
	if c := rep.ClusterCost; c != nil {
		fmt.Fprintln(w, "\nwhat the cluster layout costs per step over the single one:")
		fmt.Fprintf(w, "  wall time per step (1 / steps per second): %.2f ms -> %.2f ms: %+.2f ms, x%.2f\n",
			c.WallMsPerStep[0], c.WallMsPerStep[1], c.ExtraWallMsPerStep, c.WallPerStepRatio)
		fmt.Fprintf(w, "  step round trip p50: %+.0f ms, x%.2f; p95: %+.0f ms, x%.2f\n",
			c.ExtraRoundTripP50Ms, c.RoundTripP50Ratio, c.ExtraRoundTripP95Ms, c.RoundTripP95Ratio)
		fmt.Fprintf(w, "  CPU per step, ferry's processes and the benchmark's (with NATS): %.2f ms -> %.2f ms: %+.2f ms, x%.2f\n",
			c.CPUMsPerStep[0], c.CPUMsPerStep[1], c.ExtraCPUMsPerStep, c.CPUPerStepRatio)
	}
}
