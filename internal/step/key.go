package step

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrMalformedKey is wrapped by ParseKey's errors: the string is not a key
// that Key builds.
var ErrMalformedKey = errors.New("not a step key (phase/action/kind/name)")

// Key builds a step's key, its identity within its plan:
// "<phase>/<action>/<target kind, lowercased>/<target name>", such as
// "cutover/probe/node/web-0". The event layer derives the step's message
// ID from it, and the status and the record of passed checks hold it, so
// its bytes must not change between versions. The target's namespace is
// not part of it. The name may hold slashes (a manifest's path); the phase
// and the action never do.
func Key(phase string, action Action, target Target) string {
	return phase + "/" + string(action) + "/" + strings.ToLower(target.Kind) + "/" + target.Name
}

// ParseKey reads a key that Key built. The target has its kind as this
// package spells it (Node, not node) and no namespace, which the key does
// not hold. A key with a part missing or empty, or an action or target
// kind this package does not declare, is an error that names the key and
// wraps ErrMalformedKey.
func ParseKey(key string) (phase string, action Action, target Target, err error) {
	parts := strings.SplitN(key, "/", 4)
	if len(parts) < 4 || slices.Contains(parts, "") {
		return "", "", Target{}, fmt.Errorf("step key %q: %w", key, ErrMalformedKey)
	}
	phase, action, kind, name := parts[0], Action(parts[1]), parts[2], parts[3]
	if !slices.Contains(Actions(), action) {
		return "", "", Target{}, fmt.Errorf("step key %q: unknown action %q: %w", key, action, ErrMalformedKey)
	}
	i := slices.IndexFunc(targetKinds, func(k string) bool { return strings.ToLower(k) == kind })
	if i < 0 {
		return "", "", Target{}, fmt.Errorf("step key %q: unknown target kind %q: %w", key, kind, ErrMalformedKey)
	}
	return phase, action, Target{Kind: targetKinds[i], Name: name}, nil
}
