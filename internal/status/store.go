package status

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"

	"github.com/ferry-dev/ferry/internal/gitsource"
)

// DefaultBranch is where statuses go unless told otherwise: a branch of
// its own, so that a protected main branch still works and status commits
// do not crowd the plans' history.
const DefaultBranch = "ferry/status"

// Dir is the directory of the status files on the status branch:
// Dir/<plan>.yaml.
const Dir = "status"

// ErrNoStatus is returned by Read for a plan without a status file, or
// when the status branch does not exist yet.
var ErrNoStatus = errors.New("no status yet")

// Store keeps plans' statuses as Dir/<plan>.yaml on the branch that Git
// writes to (its Branch; DefaultBranch by convention). It only lays the
// statuses out; the commits, pushes and retries are Git's.
type Store struct {
	Git *gitsource.Branch
}

// Write commits the statuses that differ from the branch head, all in one
// commit, and returns its ID, or "" when none changed. In status files
// ferry's version wins over a person's edit; other files are kept.
func (s Store) Write(ctx context.Context, statuses []*PlanStatus) (string, error) {
	var files []gitsource.File
	for _, st := range statuses {
		if st == nil {
			continue
		}
		p, err := Path(st.Plan)
		if err != nil {
			return "", fmt.Errorf("write status: %w", err)
		}
		files = append(files, gitsource.File{Path: p, Content: func() ([]byte, error) { return Encode(st) }})
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
		plans[i] = strings.TrimSuffix(strings.TrimPrefix(p, Dir+"/"), ".yaml")
	}
	return "ferry: status of " + strings.Join(plans, ", ")
}

// Read returns a plan's status from the head of the status branch, or an
// error wrapping ErrNoStatus when it has none.
func (s Store) Read(ctx context.Context, plan string) (*PlanStatus, error) {
	p, err := Path(plan)
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
func (s Store) ReadAll(ctx context.Context) ([]*PlanStatus, error) {
	var out []*PlanStatus
	err := s.Git.ReadDir(ctx, Dir, func(name string, data []byte) error {
		if !strings.HasSuffix(name, ".yaml") {
			return nil
		}
		st, err := decodeFile(Dir+"/"+name, data)
		if err == nil {
			out = append(out, st)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *PlanStatus) int { return strings.Compare(a.Plan, b.Plan) })
	return out, nil
}

func decodeFile(name string, data []byte) (*PlanStatus, error) {
	st, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return st, nil
}

var planName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)

// Path is Dir/<plan>.yaml; a name that is not a plan's name (a Kubernetes
// object name) is refused rather than let it reach elsewhere in the tree.
func Path(plan string) (string, error) {
	if !planName.MatchString(plan) || strings.Contains(plan, "..") {
		return "", fmt.Errorf("invalid plan name %q", plan)
	}
	return Dir + "/" + plan + ".yaml", nil
}
