package statusfile

import (
	"fmt"
	"regexp"
	"strings"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/ferry-dev/ferry/internal/status"
)

// DefaultBranch is where statuses go unless told otherwise: a branch of
// its own, so that a protected main branch still works and status commits
// do not crowd the plans' history.
const DefaultBranch = "ferry/status"

// Dir is the directory of the status files on the status branch:
// Dir/<plan>.yaml.
const Dir = "status"

var planName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)

// Path is Dir/<plan>.yaml; a name that is not a plan's name (a Kubernetes
// object name) is refused rather than let it reach elsewhere in the tree.
func Path(plan string) (string, error) {
	if !planName.MatchString(plan) || strings.Contains(plan, "..") {
		return "", fmt.Errorf("invalid plan name %q", plan)
	}
	return Dir + "/" + plan + ".yaml", nil
}

// Decode reads a status document written by Encode (or by hand). Unknown
// fields are ignored, so that an older ferry reads a newer one's status.
func Decode(data []byte) (*status.PlanStatus, error) {
	var st status.PlanStatus
	if err := sigsyaml.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("decode status: %w", err)
	}
	return &st, nil
}
