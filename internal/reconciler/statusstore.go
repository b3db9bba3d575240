package reconciler

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/status"
	"github.com/ferry-dev/ferry/internal/status/statusfile"
)

// ErrNoStatus is returned by GitStatusStore.Read for a plan without a
// status file, or when the status branch does not exist yet.
var ErrNoStatus = errors.New("no status yet")

// GitStatusStore is the StatusStore on a Git branch: it keeps plans'
// statuses as statusfile.Path files (status/<plan>.yaml) on Git's branch
// (statusfile.DefaultBranch by convention). It only lays the statuses
// out; the commits, pushes and retries are Git's.
type GitStatusStore struct {
	Git *gitsource.Branch
}

var _ StatusStore = GitStatusStore{}

// Write commits the statuses that differ from the branch head, all in one
// commit, and returns its ID, or "" when none changed. In status files
// ferry's version wins over a person's edit; other files are kept.
func (s GitStatusStore) Write(ctx context.Context, statuses []*status.PlanStatus) (string, error) {
	var files []gitsource.File
	for _, st := range statuses {
		if st == nil {
			continue
		}
		p, err := statusfile.Path(st.Plan)
		if err != nil {
			return "", fmt.Errorf("write status: %w", err)
		}
		files = append(files, gitsource.File{Path: p, Content: func() ([]byte, error) { return statusfile.Encode(st) }})
	}
	commit, err := s.Git.Write(ctx, files, subject)
	if err != nil {
		return "", fmt.Errorf("write status: %w", err)
	}
	return commit, nil
}

// subject names the plans whose status changed, or counts them.
func subject(changed []string) string {
	if len(changed) > 3 {
		return fmt.Sprintf("ferry: status of %d plans", len(changed))
	}
	plans := make([]string, len(changed))
	for i, p := range changed {
		plans[i] = strings.TrimSuffix(strings.TrimPrefix(p, statusfile.Dir+"/"), ".yaml")
	}
	return "ferry: status of " + strings.Join(plans, ", ")
}

// Read returns a plan's status from the head of the status branch, or an
// error wrapping ErrNoStatus when it has none.
func (s GitStatusStore) Read(ctx context.Context, plan string) (*status.PlanStatus, error) {
	p, err := statusfile.Path(plan)
	if err != nil {
		return nil, fmt.Errorf("read status: %w", err)
	}
	data, err := s.Git.ReadFile(ctx, p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("status of %s: %w: %w", plan, ErrNoStatus, err)
	}
	if err != nil {
		return nil, fmt.Errorf("read status of %s: %w", plan, err)
	}
	return decodeFile(p, data)
}

// ReadAll returns every plan's status from the head of the status branch,
// ordered by plan name; none when the branch does not exist yet.
func (s GitStatusStore) ReadAll(ctx context.Context) ([]*status.PlanStatus, error) {
	var out []*status.PlanStatus
	err := s.Git.ReadDir(ctx, statusfile.Dir, func(name string, data []byte) error {
		if !strings.HasSuffix(name, ".yaml") {
			return nil
		}
		st, err := decodeFile(statusfile.Dir+"/"+name, data)
		if err == nil {
			out = append(out, st)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *status.PlanStatus) int { return strings.Compare(a.Plan, b.Plan) })
	return out, nil
}

func decodeFile(name string, data []byte) (*status.PlanStatus, error) {
	st, err := statusfile.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return st, nil
}
