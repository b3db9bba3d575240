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
	"time"

	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/planfile"
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
// every push to the pull request.
//
// It asks the forge for open pull requests only when the pull-request heads
// that the Git source's ls-remote lists have changed, so an idle repository
// costs no forge call. (GitHub publishes refs/pull/N/head for every pull
// request; a forge that does not is previewed once, at start.)
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

	heads    map[int]string   // pull heads when the last pass completed
	shown    map[int]string   // pull request -> head its comment shows
	unlisted map[int]unlisted // heads Git lists and the API did not
}

// unlisted is a pull-request head the forge's API did not list, since when.
type unlisted struct {
	head  string
	since time.Time
}

// Update previews the pull requests whose head moved since the last pass.
// record gives the loop's memory of a plan, so that a preview says what
// the loop would do. It is called from the loop's goroutine only.
func (p *Previews) Update(ctx context.Context, record func(plan string) observed.Record) error {
	heads := p.Pulls.PullHeads()
	if p.heads != nil && maps.Equal(heads, p.heads) {
		return nil
	}
	if p.shown == nil {
		p.shown, p.unlisted = map[int]string{}, map[int]unlisted{}
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
	for _, pr := range prs {
		open[pr.Number] = true
		listed[pr.Number] = pr.HeadSHA
		if err := p.preview(ctx, pr, record); err != nil {
			errs = append(errs, fmt.Errorf("preview #%d: %w", pr.Number, err))
		}
	}
	for n := range p.shown {
		if !open[n] {
			delete(p.shown, n)
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
	p.heads = heads
	return nil
}

// preview comments on pr when its head is not the one its comment shows
// and it changes (or changed) plan files.
func (p *Previews) preview(ctx context.Context, pr forge.PullRequest, record func(string) observed.Record) error {
	if pr.BaseRef != p.Branch || p.shown[pr.Number] == pr.HeadSHA {
		return nil
	}
	changed := p.planFiles(pr.Files)
	if len(changed) == 0 && p.shown[pr.Number] == "" {
		return nil // never touched plans: no comment
	}
	body, err := p.render(ctx, pr, changed, record)
	if err != nil {
		return err
	}
	if err := p.Forge.UpsertComment(ctx, pr.Number, PreviewKey, body); err != nil {
		return err
	}
	logging.From(ctx).Info("pull request previewed", "pr", pr.Number, "head", short(pr.HeadSHA), "plan_files", len(changed))
	p.shown[pr.Number] = pr.HeadSHA
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

// render writes the preview of a pull request's plan files at its head.
func (p *Previews) render(ctx context.Context, pr forge.PullRequest, changed []string, record func(string) observed.Record) (string, error) {
	if err := p.Pulls.FetchPull(ctx, pr.Number, pr.HeadSHA); err != nil {
		return "", err
	}
	fsys, err := p.Pulls.FS(pr.HeadSHA)
	if err != nil {
		return "", err
	}
	ctx = observed.WithRepo(ctx, fsys)
	files, err := planfile.LoadFS(fsys, p.Path)
	var problems planfile.Errors
	if err != nil && !errors.As(err, &problems) {
		return "", err
	}
	invalid := byFile(problems)
	valid := map[string]*planfile.File{}
	for _, f := range files {
		valid[f.Path] = f
	}

	var b strings.Builder
	if len(changed) == 0 {
		b.WriteString("This pull request no longer changes plan files.\n")
	}
	for _, file := range changed {
		switch f := valid[file]; {
		case invalid[file] != nil:
			fmt.Fprintf(&b, "#### `%s`: invalid\n\nMerging this would stop its plan until a later commit fixes it.\n\n```text\n", file)
			for _, e := range invalid[file] {
				b.WriteString(e.Error() + "\n")
			}
			b.WriteString("```\n\n")
		case f == nil:
			fmt.Fprintf(&b, "#### `%s`: removed\n\nMerging this stops the migration of the plan this file held before its next step; nothing is rolled back or deleted.\n\n", file)
		default:
			fmt.Fprintf(&b, "#### `%s`: plan `%s`\n\n```text\n", file, f.Plan.Metadata.Name)
			b.WriteString(p.plan(ctx, f, record))
			b.WriteString("```\n\n")
		}
	}
	title := fmt.Sprintf("ferry preview of #%d at %s", pr.Number, short(pr.HeadSHA))
	return forge.Comment(PreviewKey, title, b.String()), nil
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
