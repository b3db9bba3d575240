package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/reconciler"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/status/render"
)

// StatusConfig is the configuration of `reconciler status`.
type StatusConfig struct {
	Streams
	// Git is the plans repository; its URL is required (Branch is unused).
	Git Git
	// StatusBranch is the branch the reconciler commits statuses to.
	StatusBranch string
	// Plan names the plan to print; empty: all plans.
	Plan string
	// Output is text (phase tables), json or yaml (a PlanStatus for a named
	// plan, a list of them for all).
	Output string
	// Timeout bounds the exchange with the repository.
	Timeout time.Duration
	// Watch follows the plans until no phase is in progress, a Blocked
	// one counting as in progress (or until one failed), reading every WatchInterval: a terminal's screen is redrawn,
	// anything else gets one line per change.
	Watch         bool
	WatchInterval time.Duration
	// Terminal says Out is a terminal (the command asks the file).
	Terminal bool
}

// Status prints each plan's phase table from status/<plan>.yaml at the head
// of the status branch: all plans, or the one named. It changes nothing;
// it fails when there is no status yet.
func Status(ctx context.Context, cfg StatusConfig) error {
	if cfg.Git.URL == "" {
		return usageErrorf("--repo is required")
	}
	if err := checkOutput(cfg.Output); err != nil {
		return err
	}
	if cfg.Watch {
		if cfg.Output != OutputText {
			return usageErrorf("--watch prints text: drop -o %s", cfg.Output)
		}
		return cfg.watch(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	sts, err := cfg.read(ctx)
	if err != nil {
		return err
	}
	// A named plan prints as one object, all plans as a list.
	var v any = sts
	if cfg.Plan != "" {
		v = sts[0]
	}
	err = write(cfg.Out, cfg.Output, v, func(w io.Writer) error {
		for i, st := range sts {
			if i > 0 {
				fmt.Fprintln(w)
			}
			if err := render.Table(w, st); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return needsAction(sts)
}

// Exit codes of `reconciler status` besides 0 (nothing to act on), 1 (no
// status, or the repository not read) and 2 (a usage error): a script
// tells a phase that failed from one that waits for a person.
const (
	ExitPhaseFailed  = 3 // a phase is Failed
	ExitPhaseBlocked = 4 // a phase is Blocked (and none Failed)
)

// ExitError is an error with the exit code the command ends with.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// needsAction is an ExitError naming every Failed or Blocked phase of
// sts, or nil.
func needsAction(sts []*status.PlanStatus) error {
	var failed, blocked []string
	for _, st := range sts {
		for _, p := range st.Phases {
			switch p.State {
			case status.PhaseFailed:
				failed = append(failed, st.Plan+"/"+p.Name)
			case status.PhaseBlocked:
				blocked = append(blocked, st.Plan+"/"+p.Name)
			}
		}
	}
	switch {
	case len(failed) > 0:
		return &ExitError{Code: ExitPhaseFailed, Err: fmt.Errorf("failed: %s", strings.Join(append(failed, blocked...), ", "))}
	case len(blocked) > 0:
		return &ExitError{Code: ExitPhaseBlocked, Err: fmt.Errorf("blocked: %s", strings.Join(blocked, ", "))}
	}
	return nil
}

// read reads the named plan's status, or all of them; none is an error.
func (cfg StatusConfig) read(ctx context.Context) ([]*status.PlanStatus, error) {
	w := reconciler.GitStatusStore{Git: &gitsource.Branch{URL: cfg.Git.URL, Name: cfg.StatusBranch, Auth: cfg.Git.Auth, Timeout: cfg.Git.Timeout}}
	where := fmt.Sprintf("on branch %s of %s", cfg.StatusBranch, gitsource.RedactURL(cfg.Git.URL))
	if cfg.Plan != "" {
		st, err := w.Read(ctx, cfg.Plan)
		if errors.Is(err, reconciler.ErrNoStatus) {
			return nil, fmt.Errorf("plan %s has no status yet %s", cfg.Plan, where)
		}
		if err != nil {
			return nil, err
		}
		return []*status.PlanStatus{st}, nil
	}
	sts, err := w.ReadAll(ctx)
	if err == nil && len(sts) == 0 {
		return nil, fmt.Errorf("no plan has a status yet %s", where)
	}
	return sts, err
}

// inProgress says whether a phase of sts is approved and not ended. A
// Blocked phase has not ended: ferry goes on by itself once its cause is
// gone (a rollout that finishes, a node Ready again), so a watch follows
// it rather than ending on a moment's health check.
func inProgress(sts []*status.PlanStatus) bool {
	for _, st := range sts {
		for _, p := range st.Phases {
			switch p.State {
			case status.PhaseApproved, status.PhaseRunning, status.PhaseRollingBack, status.PhaseBlocked:
				return true
			}
		}
	}
	return false
}

// watch reads the statuses every WatchInterval and shows them until no
// phase is in progress or one failed, then ends as Status does (0, or an
// ExitError for a Failed or Blocked phase). A read that fails is said and
// tried again: a watch outlives a blip of the remote.
func (cfg StatusConfig) watch(ctx context.Context) error {
	if cfg.WatchInterval <= 0 {
		cfg.WatchInterval = 5 * time.Second
	}
	last := map[string]string{} // plan/phase -> its line, when not a terminal
	lastErr := ""
	for {
		rctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		sts, err := cfg.read(rctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			if err.Error() != lastErr {
				fmt.Fprintf(cfg.ErrOut, "%s %v; reading again every %s\n", time.Now().Format(time.TimeOnly), err, cfg.WatchInterval)
				lastErr = err.Error()
			}
		case cfg.Terminal:
			lastErr = ""
			fmt.Fprint(cfg.Out, "\033[H\033[2J") // home, clear
			for _, st := range sts {
				if err := render.Table(cfg.Out, st); err != nil {
					return err
				}
				fmt.Fprintln(cfg.Out)
			}
			fmt.Fprintf(cfg.Out, "read %s; every %s until no phase is in progress (Ctrl-C ends)\n", time.Now().Format(time.TimeOnly), cfg.WatchInterval)
		default:
			lastErr = ""
			for _, st := range sts {
				for i := range st.Phases {
					key := st.Plan + "/" + st.Phases[i].Name
					if line := render.PhaseLine(st, &st.Phases[i]); line != last[key] {
						fmt.Fprintf(cfg.Out, "%s %s\n", time.Now().Format(time.TimeOnly), line)
						last[key] = line
					}
				}
			}
		}
		if err == nil {
			end := needsAction(sts)
			var e *ExitError
			if !inProgress(sts) || (errors.As(end, &e) && e.Code == ExitPhaseFailed) {
				return end
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(cfg.WatchInterval):
		}
	}
}
