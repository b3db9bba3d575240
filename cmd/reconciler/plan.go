package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/kube"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/observer"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/reconciler"
)

// planOutput is what `reconciler plan -o json` prints: the plan with its
// defaults applied and the planner's result.
type planOutput struct {
	Plan   *v1alpha1.MigrationPlan `json:"plan"`
	Result *planner.Result         `json:"result"`
}

func planCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the management cluster (default: $KUBECONFIG, then ~/.kube/config)")
	kubeContext := fs.String("context", "", "kubeconfig context to use (default: the current context)")
	output := fs.String("o", "text", "output format: text or json")
	repoRoot := fs.String("repo-root", "", "root of the plans repository, where manifest paths are read to check whether they are applied (default: manifests are not checked and count as not applied)")
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for the clusters and the cloud to answer")
	noCloud := fs.Bool("no-cloud", false, "do not ask OpenStack (names stay unresolved, servers unknown)")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: reconciler plan FILE [flags]\n\n"+
			"Observes the live management cluster, the workload cluster through its\n"+
			"kubeconfig Secret and the OpenStack cloud through the plan's identity\n"+
			"Secret, and prints the steps that would run: the text the pull-request\n"+
			"preview shows. It changes nothing.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	paths, err := parseInterspersed(fs, args)
	if err != nil {
		return 2
	}
	if len(paths) != 1 || (*output != "text" && *output != "json") {
		fmt.Fprint(stderr, "reconciler plan: name one plan file; -o is text or json\n\n")
		fs.Usage()
		return 2
	}
	files, code := loadPlans("plan", paths, stderr)
	switch {
	case code != 0:
		return code
	case len(files) != 1:
		fmt.Fprintf(stderr, "reconciler plan: %s holds %d plans; name one file\n", paths[0], len(files))
		return 2
	}
	plan := files[0].Plan

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	c, err := managementClient(*kubeconfig, *kubeContext)
	if err != nil {
		fmt.Fprintf(stderr, "reconciler plan: %v\n", err)
		return 1
	}
	obs := &observer.Observer{Client: c}
	if !*noCloud {
		obs.Cloud = &observer.OpenStack{Client: c}
	}
	if *repoRoot != "" {
		obs.Manifests = os.DirFS(*repoRoot)
	}
	d, err := reconciler.Plan(ctx, obs, plan, observed.Record{})
	if err != nil {
		fmt.Fprintf(stderr, "reconciler plan: %v\n", err)
		return 1
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(planOutput{Plan: plan, Result: d.Result}); err != nil {
			fmt.Fprintf(stderr, "reconciler plan: %v\n", err)
			return 1
		}
		return 0
	}
	if err := d.Render(stdout, plan); err != nil {
		fmt.Fprintf(stderr, "reconciler plan: %v\n", err)
		return 1
	}
	for _, note := range d.Notes() {
		fmt.Fprintln(stderr, note)
	}
	return 0
}

// managementClient connects to the management cluster the way kubectl
// does: an explicit kubeconfig, else $KUBECONFIG, else ~/.kube/config.
func managementClient(kubeconfig, kubeContext string) (client.WithWatch, error) {
	cfg, err := managementConfig(kubeconfig, kubeContext)
	if err != nil {
		return nil, err
	}
	// With watch: the kube executor's waits watch rather than poll.
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: kube.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.Host, err)
	}
	return c, nil
}

// managementConfig is the management cluster's REST config with ferry's
// rate limits, counting requests in kubeRequests.
func managementConfig(kubeconfig, kubeContext string) (*rest.Config, error) {
	cfg, err := restConfig(kubeconfig, kubeContext)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	kube.Tune(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			kubeRequests.Add(1)
			return rt.RoundTrip(r)
		})
	})
	return cfg, nil
}

// kubeRequests counts the requests sent to the management cluster's API
// server (ferry_kube_requests_total).
var kubeRequests atomic.Uint64

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
