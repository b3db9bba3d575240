package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/reconciler"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/status/statusfile"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/ostest"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

func main() {
	reconciler := flag.String("reconciler", "bin/reconciler", "the reconciler binary to run (make build)")
	logDir := flag.String("logs", "bin/demo-logs", "directory that receives the logs of ferry's processes")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long (per run with --chaos)")
	runs := flag.Int("chaos", 0, "instead of the demo, run the migration once undisturbed and this many times with a fault each (make chaos)")
	first := flag.Int("chaos-from", 1, "with --chaos, the number of the first run: run n takes the scenario and fault it has in a batch from 1 (runs 5 and 11 roll back, 3 and 6 replace), so a short batch can take a later run")
	seed := flag.Uint64("seed", uint64(time.Now().UnixNano()), "seed of the faults' moments with --chaos (printed, to run the same again)")
	name := flag.String("scenario", "adopt", "the migration to show: adopt (seed 000), replace (seed 003 with a seed 002 gateway), kamaji (seed 004), "+
		"rollback (seed 000 rolled back after each phase in turn, then adopted again), rollback-kamaji (seed 004 adopted, then rolled back) "+
		"or rollback-replace (seed 003 moved up to the cutover, then rolled back to infrastructure); --chaos chooses its own")
	only := flag.String("fault", "", "with --chaos, each kind of run (adopt, replace, rollback) takes only its faults whose name contains this, or all of its own when none does (e.g. \"kill -9 Gitea\"); empty: all in turn")
	layoutName := flag.String("layout", "single", "how ferry's processes run: single (the demo: one `reconciler run` with embedded NATS and executors in process; chaos: a NATS server apart and two executor replicas) or cluster (a three-node NATS cluster, two reconcilers under leader election, three executor replicas)")
	forgeKind := flag.String("forge", forgeGitea, "where the plans repository and its pull requests live: gitea (a real Gitea server) or github (a Git server and the GitHub stand-in, an in-process fake of GitHub's API)")
	flag.Parse()
	sc, err := scenarioNamed(*name)
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		flag.Usage()
		os.Exit(2)
	}
	if *forgeKind != forgeGitea && *forgeKind != forgeGitHub {
		fmt.Fprintf(os.Stderr, "demo: --forge %q: gitea or github\n", *forgeKind)
		flag.Usage()
		os.Exit(2)
	}
	lay, chaosLay := inProcess, external
	switch *layoutName {
	case "single":
	case "cluster":
		lay, chaosLay = cluster, cluster
	default:
		fmt.Fprintf(os.Stderr, "demo: --layout %q: single or cluster\n", *layoutName)
		flag.Usage()
		os.Exit(2)
	}
	if sc.timeout > 0 && !flagSet("timeout") {
		*timeout = sc.timeout
	}

	interrupted, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := newDisplay(os.Stdout)
	bin, err := filepath.Abs(*reconciler)
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		out.say("%v: build it first (make build)", err)
		os.Exit(1)
	}
	if *runs > 0 {
		if err := chaos(interrupted, out, bin, *logDir, *forgeKind, chaosLay, *only, *first, *runs, *seed, *timeout); err != nil {
			out.say("chaos failed: %v", err)
			os.Exit(1)
		}
		out.say("==> chaos done in %s", time.Since(out.start).Round(time.Second))
		return
	}
	ctx, cancel := context.WithTimeout(interrupted, *timeout)
	defer cancel()
	r := testenv.NewProgram(func(format string, args ...any) { out.say("    "+format, args...) })
	var took time.Duration
	err = r.Do(func() error {
		began := time.Now()
		defer func() { took = time.Since(began) }()
		return demo(ctx, r, out, bin, *logDir, sc, *forgeKind, lay)
	})
	out.say("==> cleaning up: stopping the reconciler, the controllers and the servers, deleting the OpenStack fixture")
	r.Close()
	switch {
	case err == nil:
		what := "migrated its cluster"
		if sc.rollback {
			what = "migrated its cluster and rolled it back"
		}
		out.say("==> done: the %s scenario %s in %s (%s with starting and cleaning up)",
			sc.name, what, took.Round(time.Second), time.Since(out.start).Round(time.Second))
	case interrupted.Err() != nil:
		out.say("==> interrupted; everything the demo started is stopped")
		os.Exit(130)
	default:
		out.say("demo failed: %v", err)
		os.Exit(1)
	}
}

func demo(ctx context.Context, r *testenv.Program, out *display, bin, logDir string, sc *scenario, kind string, lay layout) error {
	out.say("==> scenario %s: %s", sc.name, sc.seed)
	w, err := newWorld(ctx, r, out, bin, logDir, lay, sc, kind)
	if err != nil {
		return err
	}
	w.followStatus = true
	if sc.run != nil {
		return sc.run(ctx, w)
	}
	began := time.Now()
	unpaused, err := w.migrate(ctx)
	if err != nil {
		return err
	}
	out.say("\n==> the %d phases took %s through pull requests", len(sc.phases), time.Since(began).Round(time.Second))
	if err := w.endStatus(ctx, every(sc.phases, status.PhaseSucceeded)); err != nil {
		return err
	}
	return verify(ctx, out, w.fx, unpaused)
}

// every is want for each of phases, for endStatus.
func every(phases []string, want status.PhaseState) map[string]status.PhaseState {
	m := map[string]status.PhaseState{}
	for _, p := range phases {
		m[p] = want
	}
	return m
}

// endStatus prints `reconciler status`, the status branch's commits and
// the Cluster's Events, and fails when a phase of want is not in the
// state want gives it, or one want has Succeeded has no Event saying so.
func (w *world) endStatus(ctx context.Context, want map[string]status.PhaseState) error {
	out, remote := w.out, w.forge.remote()
	args := append([]string{"status"}, remote.flags()...)
	out.say("\n==> reconciler %s", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, w.bin, args...)
	text, err := cmd.CombinedOutput()
	out.say("%s", strings.TrimRight(string(text), "\n"))
	if err != nil {
		return fmt.Errorf("reconciler status: %w", err)
	}
	out.say("\n==> the status commits on branch %s", statusfile.DefaultBranch)
	if err := statusLog(ctx, out, remote); err != nil {
		return err
	}
	var succeeded []string
	for _, name := range w.sc.phases {
		if want[name] == status.PhaseSucceeded {
			succeeded = append(succeeded, name)
		}
	}
	if err := w.clusterEvents(ctx, succeeded); err != nil {
		return err
	}
	st, err := w.reader.Read(ctx, w.sc.cluster)
	if err != nil {
		return err
	}
	for _, name := range w.sc.phases {
		ph := st.Phase(name)
		switch {
		case want[name] == "":
		case ph == nil:
			return fmt.Errorf("phase %s is not in the status", name)
		case ph.State != want[name]:
			return fmt.Errorf("phase %s ended %s, not %s", name, ph.State, want[name])
		}
	}
	return nil
}

// verify prints what the real controllers made of the migrated cluster,
// checked no earlier than the fixture's settle time after the last phase
// (a minute after an adoption's last unpause: a rollout would have begun
// by then), and fails when a check does not hold.
func verify(ctx context.Context, out *display, fx *fixture, unpaused time.Time) error {
	out.say("\n==> checking what the real Cluster API and CAPO controllers made of the cluster")
	// Conditions the controllers are still moving towards get two more
	// minutes.
	ctx, cancel := context.WithDeadline(ctx, unpaused.Add(fx.settle+2*time.Minute))
	defer cancel()
	var checks []ostest.Check
	what := "every check to hold"
	if fx.settle > 0 {
		what = fmt.Sprintf("%s after the last unpause, %s", fx.settle, what)
	}
	err := out.wait(ctx, what, func() (bool, string) {
		if time.Until(unpaused.Add(fx.settle)) > 0 {
			return false, "not checking before then: a rollout would have begun by then"
		}
		checks = fx.checks(ctx)
		var failing []string
		for _, c := range checks {
			if !c.OK {
				failing = append(failing, c.Name)
			}
		}
		return len(failing) == 0, "not yet: " + strings.Join(failing, ", ")
	})
	if checks == nil {
		return err
	}
	failed := 0
	for _, c := range checks {
		out.say("    %s", c)
		if !c.OK {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d checks failed", failed, len(checks))
	}
	return nil
}

// flagSet reports whether flag name was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// reconcilerPreviewKey is the key of ferry's preview comment.
const reconcilerPreviewKey = "preview"

// waitComment waits for ferry's comment with key on pull request n that
// contains want, read back from the forge, and returns it. A forge that
// does not answer (killed by a fault) is waited for.
func waitComment(ctx context.Context, out *display, host forgeHost, n int, key, what, want string) (string, error) {
	var body string
	err := out.wait(ctx, what, func() (bool, string) {
		bodies, err := host.comments(n)
		if err != nil {
			return false, "the forge does not answer: " + err.Error()
		}
		for _, b := range bodies {
			if strings.HasPrefix(b, forge.Marker(key)) {
				body = b
				return strings.Contains(b, want), "ferry has commented; waiting for the update"
			}
		}
		return false, "no comment yet"
	})
	return body, err
}

// waitPhase waits until the status branch says phase succeeded, or that
// it has done everything but wait for the next approval (the replace
// strategy's cutover ends waiting for the DNS switch), showing the step
// that runs. It returns what the progress comment shows then: the phase's
// row, or the row of its last step.
func waitPhase(ctx context.Context, out *display, reader reconciler.GitStatusStore, plan, phase string) (string, error) {
	want := "| " + phase + " | Succeeded |"
	err := out.wait(ctx, "phase "+phase+" to succeed", func() (bool, string) {
		st, err := reader.Read(ctx, plan)
		if err != nil {
			return false, "no status yet"
		}
		ph := st.Phase(phase)
		if ph == nil {
			return false, "phase not in the status yet"
		}
		detail := fmt.Sprintf("%s, %d done, %d left", ph.State, ph.Done, ph.Left)
		last, awaiting, other := "", 0, 0
		for _, s := range ph.Steps {
			switch {
			case s.State == status.StepSucceeded:
				last = s.Title()
			case s.Action == step.AwaitApproval:
				awaiting++
			default:
				other++
				if s.State == status.StepRunning || s.State == status.StepRetrying {
					detail += "; running " + s.Title()
					if s.Message != "" {
						// What the executor last said of it (a wait's
						// progress): a run that times out shows why.
						detail += " (" + s.Message + ")"
					}
				}
			}
		}
		if ph.State != status.PhaseSucceeded && other == 0 && awaiting > 0 && last != "" {
			want = "| " + phase + " | " + last + " | Succeeded |"
			out.say("    phase %s has done its steps and awaits the next approval", phase)
			return true, detail
		}
		return ph.State == status.PhaseSucceeded, detail
	})
	return want, err
}

// statusLogMax is how many of the status branch's commits statusLog
// prints: the newest.
const statusLogMax = 12

// statusLog prints the newest commits of the status branch, newest first,
// and how many older ones it leaves out.
func statusLog(ctx context.Context, out *display, remote gitRemote) error {
	url, auth, err := remote.goGit()
	if err != nil {
		return err
	}
	repo, err := git.CloneContext(ctx, memory.NewStorage(), nil, &git.CloneOptions{
		URL: url, Auth: auth, ReferenceName: plumbing.NewBranchReferenceName(statusfile.DefaultBranch), SingleBranch: true,
	})
	if err != nil {
		return fmt.Errorf("clone the status branch: %w", err)
	}
	head, err := repo.Head()
	if err != nil {
		return err
	}
	commits, err := repo.Log(&git.LogOptions{From: head.Hash()})
	if err != nil {
		return err
	}
	n := 0
	if err := commits.ForEach(func(c *object.Commit) error {
		if n++; n <= statusLogMax {
			subject, _, _ := strings.Cut(c.Message, "\n")
			out.say("    %s %s  %s", c.Hash.String()[:10], c.Author.When.Format("15:04:05"), subject)
		}
		return nil
	}); err != nil {
		return err
	}
	if n > statusLogMax {
		out.say("    … and %d older commits", n-statusLogMax)
	}
	return nil
}

// display prints the demo's lines and, while it waits, one status line
// that says what for (redrawn in place on a terminal, printed when it
// changes otherwise).
type display struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	live  bool // a status line is on screen
	start time.Time
}

func newDisplay(f *os.File) *display {
	fi, err := f.Stat()
	return &display{w: f, tty: err == nil && fi.Mode()&os.ModeCharDevice != 0, start: time.Now()}
}

func (d *display) say(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clearLocked()
	fmt.Fprintf(d.w, format+"\n", args...)
}

// block prints a comment's body under a title.
func (d *display) block(title, body string) {
	d.say("──── %s %s\n%s\n%s", title, strings.Repeat("─", max(0, 66-len(title))), strings.TrimRight(body, "\n"), strings.Repeat("─", 72))
}

func (d *display) clearLocked() {
	if d.live {
		fmt.Fprint(d.w, "\r\033[K")
		d.live = false
	}
}

// wait polls check every half second until it reports done, showing what
// the demo waits for and check's detail.
func (d *display) wait(ctx context.Context, what string, check func() (bool, string)) error {
	began := time.Now()
	last := ""
	for {
		ok, detail := check()
		if ok {
			d.mu.Lock()
			d.clearLocked()
			d.mu.Unlock()
			d.say("    ✓ %s (%s)", what, time.Since(began).Round(100*time.Millisecond))
			return nil
		}
		line := fmt.Sprintf("    … waiting for %s (%ds): %s", what, int(time.Since(began).Seconds()), detail)
		d.mu.Lock()
		switch {
		case d.tty:
			d.clearLocked()
			fmt.Fprint(d.w, line)
			d.live = true
		case detail != last:
			fmt.Fprintln(d.w, line)
		}
		last = detail
		d.mu.Unlock()
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %s)", what, context.Cause(ctx), detail)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
