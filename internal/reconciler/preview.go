package reconciler

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/planfile"
	"github.com/ferry-dev/ferry/internal/planner"
	"github.com/ferry-dev/ferry/internal/status"
)

// PreviewKey is the comment key of the preview on a pull request.
const PreviewKey = "preview"

// PullSource reads pull requests' trees from the plans repository.
type PullSource interface {
	// PullHeads returns the pull requests' heads the last Poll saw
	// (refs/pull/N/head), by number.
	PullHeads() map[int]string
	// FetchPull makes head, the head of pull request n, readable by FS.
	FetchPull(ctx context.Context, n int, head string) error
	FS(revision string) (fs.FS, error)
}

// Previews keeps one preview comment on each open pull request that changes
// a plan file: for each changed file, its validation errors with file and
// line, or the steps `reconciler plan` prints for it against the live
// clusters, or what removing it does. The comment is edited in place on
// every push to the pull request. Each such pull request's head also gets
// the merge gate, the commit status GateContext (see gate): pending while
// previewing, then success or failure with the reason, again whenever the
// tracked branch or another pull request changes the verdict.
//
// It asks the forge for open pull requests only when the pull-request heads
// that the Git source's ls-remote lists have changed, so an idle repository
// costs no forge call. (GitHub publishes refs/pull/N/head for every pull
// request; a forge that does not is previewed once, at start.)
//
// Anyone who can open a pull request, from a fork too, chooses what its
// head holds, so the preview reads it within bounds: a plan file over
// planfile.MaxSize is refused by its size and never read, and the plans
// directory within Limits. And only a pull request from a branch of the
// repository itself, opened by an account that may write to it, is
// previewed against the live clusters and cloud; any other's shows the
// plan alone (its validation, settings and phases): the live state's
// names, IDs and errors are not for outsiders to read, nor its
// observation theirs to cause.
type Previews struct {
	Forge forge.Forge
	Pulls PullSource
	// Observer observes plans for previews; give it its own instance,
	// since its repository tree is the pull request's.
	Observer Observer
	// Branch is the tracked branch: only pull requests into it are
	// previewed. Path is the plans directory.
	Branch, Path string
	// APILag is how long a pull-request head that Git lists but the
	// forge's API does not is looked for again at every Update: GitHub
	// creates refs/pull/N/head before its API lists the pull request, and
	// the webhook that follows changes no head. Default 2m; a head the
	// API never lists (a closed pull request's) is then left alone.
	APILag time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Running is the phase of a plan that runs now, "" when none does
	// (RunningPhase of its status): the gate fails a pull request that
	// stops it without saying so. Nil: no plan counts as running.
	Running func(plan string) string
	// Policy is the review policy: a pull request that approves a phase
	// or a rollback of a plan it asks reviews of fails the gate until it
	// has them (the loop refuses the approval otherwise; see
	// GitApprovals.Policy).
	Policy Policy
	// StatusURL is the target URL of the gate's commit status; empty:
	// the pull request's page.
	StatusURL string
	// Limits bound how many plan files of a pull request's plans
	// directory are read, and how many bytes of them, all plans in it
	// counted, not only those it changes. Zero fields:
	// DefaultPreviewLimits'.
	Limits planfile.Limits

	heads     map[int]string     // pull heads when the last pass completed
	base      string             // the branch revision of the last completed pass
	conflicts bool               // a gate failed because two pull requests raise one plan
	shown     map[int]string     // pull request -> head and verdict its comment shows
	plans     map[int]*pullPlans // pull request -> what its head changes, when it touches plans
	gated     map[int]string     // pull request -> head, state and description of its gate
	unlisted  map[int]unlisted   // heads Git lists and the API did not
}

// DefaultPreviewLimits bound what a preview reads of a pull request's
// plans directory: a plan is a page of YAML (planfile.MaxSize), so these
// hold hundreds of plans while bounding the memory any pull request can
// make the reconciler use.
var DefaultPreviewLimits = planfile.Limits{Files: 256, Bytes: 4 << 20}

// unlisted is a pull-request head the forge's API did not list, since when.
type unlisted struct {
	head  string
	since time.Time
}

// Update previews the pull requests whose head moved since the last pass,
// and sets the gate of each whose verdict changed, after a push to it, to
// the branch (base, its plan files) or to another pull request. record
// gives the loop's memory of a plan, so that a preview says what the loop
// would do. It is called from the loop's goroutine only.
func (p *Previews) Update(ctx context.Context, base Base, record func(plan string) observed.Record) error {
	heads := p.Pulls.PullHeads()
	if p.heads != nil && maps.Equal(heads, p.heads) && base.Revision == p.base && !p.conflicts {
		return nil
	}
	if p.shown == nil {
		p.shown, p.unlisted = map[int]string{}, map[int]unlisted{}
		p.plans, p.gated = map[int]*pullPlans{}, map[int]string{}
	}
	if p.Running == nil {
		p.Running = func(string) string { return "" }
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	if p.APILag == 0 {
		p.APILag = 2 * time.Minute
	}
	prs, err := p.Forge.OpenPullRequests(ctx)
	if err != nil {
		return fmt.Errorf("list open pull requests: %w", err)
	}
	open := map[int]bool{}
	listed := map[int]string{}
	var errs []error
	loaded := map[int]*loadedPull{}
	for _, pr := range prs {
		open[pr.Number] = true
		listed[pr.Number] = pr.HeadSHA
		l, err := p.load(ctx, pr)
		if err != nil {
			errs = append(errs, fmt.Errorf("preview #%d: %w", pr.Number, err))
			continue
		}
		loaded[pr.Number] = l
	}
	for _, m := range []map[int]string{p.shown, p.gated} {
		maps.DeleteFunc(m, func(n int, _ string) bool { return !open[n] })
	}
	maps.DeleteFunc(p.plans, func(n int, _ *pullPlans) bool { return !open[n] })
	bp := base.plans()
	raisedBy := map[string][]int{}
	for _, n := range slices.Sorted(maps.Keys(p.plans)) {
		for _, name := range p.plans[n].raises(bp) {
			raisedBy[name] = append(raisedBy[name], n)
		}
	}
	p.conflicts = false
	for _, pr := range prs {
		pp := p.plans[pr.Number]
		if pp == nil || loaded[pr.Number] == nil {
			continue
		}
		v := gate(pr.Number, pp, bp, raisedBy, p.Running)
		short, err := p.reviewShortfall(ctx, pr, pp, bp)
		if err != nil {
			errs = append(errs, fmt.Errorf("preview #%d: %w", pr.Number, err))
			continue
		}
		if len(short) > 0 {
			// A review changes no head: judged again every pass.
			v.reasons, v.state, v.conflict = append(v.reasons, short...), forge.StateFailure, true
		}
		p.conflicts = p.conflicts || v.conflict
		if err := p.preview(ctx, pr, loaded[pr.Number], v, record); err != nil {
			errs = append(errs, fmt.Errorf("preview #%d: %w", pr.Number, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...) // heads stay old: the next cycle tries again
	}
	if p.lagging(heads, listed) {
		// The API has not caught up with what the ls-remote saw: the
		// heads stay old, and the next cycle lists again.
		return nil
	}
	if heads == nil {
		heads = map[int]string{}
	}
	p.heads, p.base = heads, base.Revision
	return nil
}

// Open returns the open pull requests that have a preview (or had one), for
// comment commands.
func (p *Previews) Open() []int {
	return slices.Sorted(maps.Keys(p.plans))
}

// Redo makes the next Update preview pull request n again and set its
// gate again (`/ferry preview`).
func (p *Previews) Redo(n int) {
	delete(p.shown, n)
	delete(p.gated, n)
	p.heads = nil
}

// Base is the tracked branch as the loop last loaded it: the merge gate
// compares pull requests with its plans.
type Base struct {
	Revision string
	// Files are its valid plan files.
	Files []*planfile.File
}

func (b Base) plans() basePlans {
	bp := basePlans{rev: b.Revision, byPath: map[string]*v1alpha1.MigrationPlan{}, byName: map[string]*v1alpha1.MigrationPlan{}}
	for _, f := range b.Files {
		bp.byPath[f.Path], bp.byName[f.Plan.Metadata.Name] = f.Plan, f.Plan
	}
	return bp
}

// loadedPull is the tree of a pull request's head that a preview renders:
// its valid plan files by path and the problems of the others; nil when
// the pull request is not previewed.
type loadedPull struct {
	changed []string
	valid   map[string]*planfile.File
	invalid map[string]planfile.Errors
	// over says how the plans directory exceeds Limits; then nothing of
	// it was read, and every changed file counts as invalid for the gate.
	over *planfile.LimitError
	fsys fs.FS
}

// load reads the head of pr when it is new and pr changes (or changed)
// plan files into the tracked branch, and keeps what the gate reads of it
// in p.plans. It returns nil, nil for a pull request that is not
// previewed; the head read before when it has not moved.
func (p *Previews) load(ctx context.Context, pr forge.PullRequest) (*loadedPull, error) {
	if pr.BaseRef != p.Branch {
		return nil, nil
	}
	changed := p.planFiles(pr.Files)
	if len(changed) == 0 && p.shown[pr.Number] == "" {
		delete(p.plans, pr.Number)
		return nil, nil // never touched plans: no comment, no gate
	}
	if err := p.Pulls.FetchPull(ctx, pr.Number, pr.HeadSHA); err != nil {
		return nil, err
	}
	fsys, err := p.Pulls.FS(pr.HeadSHA)
	if err != nil {
		return nil, err
	}
	lim := p.Limits
	if lim.Files == 0 {
		lim.Files = DefaultPreviewLimits.Files
	}
	if lim.Bytes == 0 {
		lim.Bytes = DefaultPreviewLimits.Bytes
	}
	files, err := planfile.LoadFSWithin(fsys, p.Path, lim)
	var problems planfile.Errors
	var over *planfile.LimitError
	if err != nil && !errors.As(err, &problems) && !errors.As(err, &over) {
		return nil, err
	}
	l := &loadedPull{changed: changed, valid: map[string]*planfile.File{}, invalid: byFile(problems), over: over, fsys: fsys}
	for _, f := range files {
		l.valid[f.Path] = f
	}
	pp := &pullPlans{head: pr.HeadSHA, title: pr.Title}
	for _, path := range changed {
		cf := changedFile{path: path, problems: len(l.invalid[path])}
		if over != nil {
			cf.problems = 1 // not read: the gate must not pass it
		}
		if f := l.valid[path]; f != nil && cf.problems == 0 {
			cf.plan = f.Plan
		}
		pp.files = append(pp.files, cf)
	}
	p.plans[pr.Number] = pp
	return l, nil
}

// preview comments on pr when its head or its verdict is not the one its
// comment shows, and sets its gate when that changed.
func (p *Previews) preview(ctx context.Context, pr forge.PullRequest, l *loadedPull, v verdict, record func(string) observed.Record) error {
	shows := pr.HeadSHA + " " + v.state + " " + strings.Join(v.reasons, "\n")
	if p.shown[pr.Number] != shows {
		if err := p.setGate(ctx, pr, forge.StatePending, fmt.Sprintf("previewing %d plan file(s)", len(l.changed))); err != nil {
			return err
		}
		outsider, err := p.outsider(ctx, pr)
		if err != nil {
			return err
		}
		if err := p.Forge.UpsertComment(ctx, pr.Number, PreviewKey, p.render(ctx, pr, l, v, outsider, record)); err != nil {
			return err
		}
		logging.From(ctx).Info("pull request previewed", "pr", pr.Number, "head", short(pr.HeadSHA), "plan_files", len(l.changed), "gate", v.state, "live", outsider == "")
		p.shown[pr.Number] = shows
	}
	return p.setGate(ctx, pr, v.state, v.description())
}

// outsider says why pr's preview must not show the live state: its head
// is a fork's, or its author may not write to the repository (the same
// rule as for `/ferry` commands); "" when it may.
func (p *Previews) outsider(ctx context.Context, pr forge.PullRequest) (string, error) {
	switch {
	case pr.Fork:
		return "it comes from a fork", nil
	case pr.Author == "":
		return "its author is not known", nil
	}
	perm, err := p.Forge.Permission(ctx, pr.Author)
	if err != nil {
		return "", fmt.Errorf("permission of %s: %w", pr.Author, err)
	}
	if !forge.CanWrite(perm) {
		return fmt.Sprintf("its author @%s has %s access to the repository, not write", pr.Author, perm), nil
	}
	return "", nil
}

// setGate sets the gate's commit status on pr's head unless it says that
// already.
func (p *Previews) setGate(ctx context.Context, pr forge.PullRequest, state, description string) error {
	set := pr.HeadSHA + " " + state + " " + description
	if p.gated[pr.Number] == set {
		return nil
	}
	url := p.StatusURL
	if url == "" {
		url = pr.URL
	}
	if err := p.Forge.SetStatus(ctx, pr.HeadSHA, GateContext, state, description, url); err != nil {
		return fmt.Errorf("set %s: %w", GateContext, err)
	}
	p.gated[pr.Number] = set
	return nil
}

// lagging reports whether a head Git lists, new or moved since the last
// completed pass, is one the API lists differently or not at all, for
// less than APILag.
func (p *Previews) lagging(heads, listed map[int]string) bool {
	now := p.Now()
	lagging := false
	for n, head := range heads {
		if p.heads[n] == head || listed[n] == head {
			delete(p.unlisted, n)
			continue
		}
		u, ok := p.unlisted[n]
		if !ok || u.head != head {
			u = unlisted{head: head, since: now}
			p.unlisted[n] = u
		}
		if now.Sub(u.since) < p.APILag {
			lagging = true
		}
	}
	for n := range p.unlisted {
		if _, ok := heads[n]; !ok {
			delete(p.unlisted, n)
		}
	}
	return lagging
}

// planFiles picks the plan files under Path among a pull request's files.
func (p *Previews) planFiles(files []string) []string {
	var out []string
	for _, f := range files {
		if strings.HasPrefix(f, p.Path+"/") && planfile.IsPlanFile(path.Base(f)) && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

// render writes the preview of a pull request's plan files at its head,
// after the gate's verdict. outsider is why it shows the plans alone, ""
// when it shows their steps against the live state.
func (p *Previews) render(ctx context.Context, pr forge.PullRequest, l *loadedPull, v verdict, outsider string, record func(string) observed.Record) string {
	ctx = observed.WithRepo(ctx, l.fsys)
	var b strings.Builder
	if v.state == forge.StateFailure {
		fmt.Fprintf(&b, "**`%s` fails:**\n\n", GateContext)
		for _, r := range v.reasons {
			fmt.Fprintf(&b, "- %s\n", r)
		}
		b.WriteString("\n")
	}
	if l.over != nil {
		fmt.Fprintf(&b, "#### Not previewed\n\n%s: a preview reads at most %d plan files, and %d bytes of them, all plans in `%s/` counted, so that any pull request costs a bounded amount of work. Nothing in `%s/` was read, so `%s` cannot pass; make the directory smaller, or preview with `reconciler plan`.\n\n",
			l.over.Error(), l.over.Limits.Files, l.over.Limits.Bytes, p.Path, p.Path, GateContext)
		return forge.Comment(PreviewKey, fmt.Sprintf("ferry preview of #%d at %s", pr.Number, short(pr.HeadSHA)), b.String())
	}
	if outsider != "" && len(l.changed) > 0 {
		fmt.Fprintf(&b, "This preview shows each plan alone, not the steps it takes: %s, and only a pull request from a branch of this repository by an author with write access is previewed against the live clusters and cloud.\n\n", outsider)
	}
	if len(l.changed) == 0 {
		b.WriteString("This pull request no longer changes plan files.\n")
	}
	for _, file := range l.changed {
		switch f := l.valid[file]; {
		case l.invalid[file] != nil:
			fmt.Fprintf(&b, "#### `%s`: invalid\n\nMerging this would stop its plan until a later commit fixes it.\n\n```text\n", file)
			for _, e := range l.invalid[file] {
				b.WriteString(e.Error() + "\n")
			}
			b.WriteString("```\n\n")
		case f == nil:
			fmt.Fprintf(&b, "#### `%s`: removed\n\nMerging this stops the migration of the plan this file held before its next step; nothing is rolled back or deleted (a rollback is asked with `spec.rollback`, before the file goes).\n\n", file)
		case outsider != "":
			fmt.Fprintf(&b, "#### `%s`: plan `%s`, valid\n\n```text\n", file, f.Plan.Metadata.Name)
			b.WriteString(planAlone(f.Plan))
			b.WriteString("```\n\n")
		default:
			fmt.Fprintf(&b, "#### `%s`: plan `%s`\n\n```text\n", file, f.Plan.Metadata.Name)
			b.WriteString(p.plan(ctx, f, record))
			b.WriteString("```\n\n")
		}
	}
	title := fmt.Sprintf("ferry preview of #%d at %s", pr.Number, short(pr.HeadSHA))
	return forge.Comment(PreviewKey, title, b.String())
}

// planAlone is what the plan asks for, read from it alone: its settings
// with the defaults applied and its phases, approved or not, as
// `reconciler plan` heads its output. Nothing is observed.
func planAlone(p *v1alpha1.MigrationPlan) string {
	var b strings.Builder
	s := p.Spec
	fmt.Fprintf(&b, "Plan %s: cluster %s/%s, strategy %s, control plane %s\n", p.Metadata.Name, s.Cluster.Namespace, s.Cluster.Name, s.Strategy, s.Target.ControlPlane.Provider)
	approve := s.Approve
	if approve == "" {
		approve = "(nothing)"
	}
	fmt.Fprintf(&b, "Approved up to: %s\n", approve)
	rollback, rollingBack := p.RollbackTo()
	if rollingBack {
		fmt.Fprintf(&b, "Rolling back to: %s (every phase after it is undone, the last first)\n", s.Rollback.To)
	}
	b.WriteString("\nSettings (defaults applied):\n")
	for _, line := range planner.Settings(p) {
		fmt.Fprintf(&b, "  %s\n", line)
	}
	b.WriteString("\nPhases:\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	approved := p.PhaseIndex(s.Approve)
	for i, ph := range p.Phases() {
		what := "not approved"
		switch {
		case rollingBack && i > rollback:
			what = "to be undone"
		case i <= approved:
			what = "approved"
		}
		if ph == p.PointOfNoReturn() {
			what += "; the point of no return"
		}
		fmt.Fprintf(tw, "  %s\t%s\n", ph, what)
	}
	tw.Flush()
	return b.String()
}

// plan is the text `reconciler plan` prints for one valid plan file, or
// why it could not be planned.
func (p *Previews) plan(ctx context.Context, f *planfile.File, record func(string) observed.Record) string {
	d, err := Plan(ctx, p.Observer, f.Plan, record(f.Plan.Metadata.Name))
	switch {
	case err != nil && d.Snapshot == nil:
		return "The live state could not be read, so no steps are shown: " + err.Error() + "\n"
	case err != nil:
		return "The plan could not be planned: " + err.Error() + "\n"
	}
	var b strings.Builder
	if err := d.Render(&b, f.Plan); err != nil {
		return err.Error() + "\n"
	}
	for _, note := range d.Notes() {
		b.WriteString(note + "\n")
	}
	return b.String()
}

// reviewShortfall says, for each plan that pull request pr approves (a
// phase or a rollback; approval) or changes, what its approval or change
// lacks of the review policy (Policy.lacks): one reason per lack.
func (p *Previews) reviewShortfall(ctx context.Context, pr forge.PullRequest, pp *pullPlans, bp basePlans) ([]string, error) {
	var reasons []string
	var approvers []string
	asked := false
	for _, f := range pp.files {
		phase := f.approval(bp) // "": a change to the plan, which its owners judge
		if !p.Policy.asks(f.path, phase) {
			continue
		}
		if !asked {
			var err error
			if approvers, err = reviewApprovers(ctx, p.Forge, pr); err != nil {
				return nil, fmt.Errorf("reviews: %w", err)
			}
			asked = true
		}
		for _, l := range p.Policy.lacks(f.path, phase, pr.Number, approvers) {
			reasons = append(reasons, fmt.Sprintf("plan %s: %s", f.plan.Metadata.Name, l.why))
		}
	}
	return reasons, nil
}

// approval is the approval that the pull request holding f makes, as
// GitApprovals.Find names it once merged: a rollback it asks anew
// (status.RollbackApproval), spec.approve when it raises it, or when it
// removes a rollback (then spec.approve is approved by this change); ""
// for none.
func (f changedFile) approval(base basePlans) string {
	if f.plan == nil {
		return ""
	}
	was := base.byName[f.plan.Metadata.Name]
	if r := f.plan.Spec.Rollback; r != nil {
		if was == nil || was.Spec.Rollback == nil || was.Spec.Rollback.To != r.To {
			return status.RollbackApproval(r.To)
		}
		return ""
	}
	if f.plan.PhaseIndex(f.plan.Spec.Approve) > approveIndex(was) || (was != nil && was.Spec.Rollback != nil) {
		return f.plan.Spec.Approve
	}
	return ""
}
