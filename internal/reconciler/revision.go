package reconciler

// Loading a revision of the plans repository: the poll, the plan files,
// invalid and removed files, the previews.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"sort"

	"github.com/ferry-dev/ferry/internal/logging"
	"github.com/ferry-dev/ferry/internal/planfile"
)

// loadedRevision is the plan files of a revision loaded. It does not
// change once loaded: workers read it while the next pass loads another.
type loadedRevision struct {
	rev      string
	fsys     fs.FS
	files    []*planfile.File
	byName   map[string]*planfile.File
	problems planfile.Errors
}

// pass polls the repository and loads the branch's head, records invalid
// and removed plan files, updates previews, and returns the plans to
// reconcile: those not at rest.
func (l *Loop) pass(ctx context.Context) (Cycle, []*planfile.File, error) {
	l.progress.enter(stagePoll)
	pollCtx, cancel := context.WithTimeout(ctx, l.Timeout)
	rev, _, err := l.Source.Poll(pollCtx)
	cancel()
	if err != nil {
		return Cycle{}, nil, fmt.Errorf("poll plans repository: %w", err)
	}
	cycle := Cycle{Revision: rev, At: l.Now().UTC()}
	l.checkHistory(ctx, rev)
	l.progress.enter(stageLoad)
	files, problems, err := l.load(rev)
	if err != nil {
		return Cycle{}, nil, err
	}
	todo := l.sortFiles(ctx, cycle, files, problems)
	if l.Previews != nil {
		l.progress.enter(stagePreviews)
		previewCtx, cancel := context.WithTimeout(ctx, l.Timeout)
		defer cancel()
		if err := l.Previews.Update(previewCtx, Base{Revision: rev, Files: files}, l.record); err != nil {
			return cycle, todo, err
		}
	}
	if l.Commands != nil {
		l.progress.enter(stageCommands)
		commandsCtx, cancel := context.WithTimeout(ctx, l.Timeout)
		defer cancel()
		if err := l.Commands.Update(commandsCtx); err != nil {
			return cycle, todo, err
		}
	}
	return cycle, todo, nil
}

// sortFiles records the invalid files and the removed plans of cycle's
// revision, and returns the files of the plans to reconcile: those not at
// rest.
func (l *Loop) sortFiles(ctx context.Context, cycle Cycle, files []*planfile.File, problems planfile.Errors) []*planfile.File {
	log := logging.From(ctx).With("revision", short(cycle.Revision))
	seen := map[string]bool{}
	invalid := byFile(problems)
	for _, file := range slices.Sorted(maps.Keys(invalid)) {
		// A plan whose file broke is not removed: it waits for the fix.
		plan := l.planOf(file)
		if plan != "" {
			seen[plan] = true
		}
		log.Warn("invalid plan file: its plan waits for a fix; the other plans go on", "file", file, "plan", plan, "problems", len(invalid[file]))
		if l.Recorder != nil {
			l.Recorder.Invalid(ctx, cycle, file, plan, invalid[file])
		}
	}
	var todo []*planfile.File
	for _, f := range files {
		seen[f.Plan.Metadata.Name] = true
		if !l.state(f.Plan.Metadata.Name).atRest(cycle, l.Resync) {
			todo = append(todo, f)
		}
	}
	var removed []string
	for name, st := range l.states() {
		if !seen[name] && st.removed() {
			removed = append(removed, name)
		}
	}
	sort.Strings(removed)
	for _, name := range removed {
		log.Warn("plan file removed from the branch: its migration stops; nothing is rolled back", "plan", name)
		if l.Recorder != nil {
			l.Recorder.Removed(ctx, cycle, name)
		}
	}
	return todo
}

// load decodes the plan files at rev, or returns those of the last cycle
// when rev is the same: an idle repository is not parsed again.
func (l *Loop) load(rev string) ([]*planfile.File, planfile.Errors, error) {
	if loaded := l.loaded.Load(); loaded != nil && loaded.rev == rev {
		return loaded.files, loaded.problems, nil
	}
	fsys, err := l.Source.FS(rev)
	if err != nil {
		return nil, nil, fmt.Errorf("read revision %s: %w", short(rev), err)
	}
	files, err := planfile.LoadFS(fsys, l.Path)
	var problems planfile.Errors
	if err != nil && !errors.As(err, &problems) {
		return nil, nil, fmt.Errorf("load plans at %s: %w", short(rev), err)
	}
	byName := make(map[string]*planfile.File, len(files))
	for _, f := range files {
		byName[f.Plan.Metadata.Name] = f
	}
	l.loaded.Store(&loadedRevision{rev: rev, fsys: fsys, files: files, byName: byName, problems: problems})
	return files, problems, nil
}

func byFile(problems planfile.Errors) map[string]planfile.Errors {
	out := map[string]planfile.Errors{}
	for _, e := range problems {
		out[e.File] = append(out[e.File], e)
	}
	return out
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}
