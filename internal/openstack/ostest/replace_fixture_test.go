//go:build openstack

package ostest_test

import (
	"testing"

	"github.com/ferry-dev/ferry/internal/openstack/ostest"
)

func TestReplaceableFixtureOpenStack(t *testing.T) {
	r := ostest.NewReplaceable(t, "tenant-a", 3)
	t.Logf("old nodes: %v", r.OldNodes)
}
