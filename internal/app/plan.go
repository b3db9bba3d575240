package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/observer"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/reconciler"
)

// PlanConfig is the configuration of `reconciler plan`.
type PlanConfig struct {
	Streams
	// File is the plan file; it must hold one plan.
	File string
	// Kube loads the management cluster's config.
	Kube RESTConfigGetter
	// Output is text (the pull-request preview), json or yaml (PlanOutput).
	Output string
	// RepoDir is a checkout of the plans repository, where manifest paths
	// are read to check whether they are applied; empty: manifests are not
	// checked and count as not applied.
	RepoDir string
	// Timeout bounds the observation of the clusters and the cloud.
	Timeout time.Duration
	// NoCloud leaves OpenStack unasked.
	NoCloud bool
}

// PlanOutput is what `reconciler plan -o json` prints: the plan with its
// defaults applied and the planner's result.
type PlanOutput struct {
	Plan   *v1alpha1.MigrationPlan `json:"plan"`
	Result *planner.Result         `json:"result"`
}

// Plan observes the live management cluster, the workload cluster through
// its kubeconfig Secret and the OpenStack cloud through the plan's identity
// Secret, and prints the steps that would run. It changes nothing.
func Plan(ctx context.Context, cfg PlanConfig) error {
	if err := checkOutput(cfg.Output); err != nil {
		return err
	}
	files, err := loadPlans([]string{cfg.File}, cfg.ErrOut)
	if err != nil {
		return err
	}
	if len(files) != 1 {
		return usageErrorf("%s holds %d plans; name one file", cfg.File, len(files))
	}
	plan := files[0].Plan
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	c, err := (&management{getter: cfg.Kube}).client()
	if err != nil {
		return err
	}
	obs := &observer.Observer{Client: c}
	if !cfg.NoCloud {
		obs.Cloud = &observer.OpenStack{Client: c}
	}
	if cfg.RepoDir != "" {
		obs.Manifests = os.DirFS(cfg.RepoDir)
	}
	d, err := reconciler.Plan(ctx, obs, plan, observed.Record{})
	if err != nil {
		return err
	}
	text := func(w io.Writer) error { return d.Render(w, plan) }
	if err := write(cfg.Out, cfg.Output, PlanOutput{Plan: plan, Result: d.Result}, text); err != nil {
		return err
	}
	if cfg.Output == OutputText {
		for _, note := range d.Notes() {
			fmt.Fprintln(cfg.ErrOut, note)
		}
	}
	return nil
}
