package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/status"
)

func statusCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	repo := fs.String("repo", "", "URL of the plans repository (https, http, ssh or file)")
	branch := fs.String("status-branch", status.DefaultBranch, "branch the reconciler commits statuses to")
	output := fs.String("o", "text", "output format: text or json")
	var git gitFlags
	git.registerAuth(fs)
	tokenFile := fs.String("token-file", "", "deprecated: use --git-token-file")
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for the repository")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: reconciler status [PLAN] --repo URL [flags]\n\n"+
			"Prints each plan's phase table (phase, state, steps done/left, current\n"+
			"step, attempts, last error, who approved) from status/<plan>.yaml at the\n"+
			"head of the status branch: all plans, or the one named. It changes\n"+
			"nothing. Exits 1 when there is no status yet.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	plans, err := parseInterspersed(fs, args)
	if err != nil {
		return 2
	}
	if len(plans) > 1 || *repo == "" || (*output != "text" && *output != "json") {
		fmt.Fprint(stderr, "reconciler status: name at most one plan, give --repo; -o is text or json\n\n")
		fs.Usage()
		return 2
	}
	if *tokenFile != "" {
		fmt.Fprintln(stderr, "reconciler status: --token-file is deprecated and goes in a later release; use --git-token-file")
		if git.tokenFile == "" {
			git.tokenFile = *tokenFile
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	w := status.Store{Git: &gitsource.Writer{URL: *repo, Branch: *branch, Auth: git.auth(), Timeout: git.timeout}}
	var sts []*status.PlanStatus
	if len(plans) == 1 {
		st, err := w.Read(ctx, plans[0])
		if errors.Is(err, status.ErrNoStatus) {
			fmt.Fprintf(stderr, "reconciler status: plan %s has no status yet on branch %s of %s\n", plans[0], *branch, gitsource.RedactURL(*repo))
			return 1
		}
		if err != nil {
			fmt.Fprintf(stderr, "reconciler status: %v\n", err)
			return 1
		}
		sts = []*status.PlanStatus{st}
	} else {
		sts, err = w.ReadAll(ctx)
		if err != nil {
			fmt.Fprintf(stderr, "reconciler status: %v\n", err)
			return 1
		}
		if len(sts) == 0 {
			fmt.Fprintf(stderr, "reconciler status: no plan has a status yet on branch %s of %s\n", *branch, gitsource.RedactURL(*repo))
			return 1
		}
	}

	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		// A named plan prints as one object, all plans as a list.
		var v any = sts
		if len(plans) == 1 {
			v = sts[0]
		}
		if err := enc.Encode(v); err != nil {
			fmt.Fprintf(stderr, "reconciler status: %v\n", err)
			return 1
		}
		return 0
	}
	for i, st := range sts {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if err := status.Table(stdout, st); err != nil {
			fmt.Fprintf(stderr, "reconciler status: %v\n", err)
			return 1
		}
	}
	return 0
}
