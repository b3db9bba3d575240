package main

import (
	"slices"
	"strings"
	"testing"
)

// TestCompareServers: after the replace rollback Nova holds exactly the
// servers there were after infrastructure; a kept server gone or changed,
// a built one left, or another one is each reported.
func TestCompareServers(t *testing.T) {
	kept := map[string]string{"g": "vpn-1 ACTIVE"}
	built := map[string]string{"n1": "os-md-0-a ACTIVE", "n2": "os-md-0-b ACTIVE"}
	if touched, left, stray := compareServers(kept, built, map[string]string{"g": "vpn-1 ACTIVE"}); len(touched)+len(left)+len(stray) != 0 {
		t.Errorf("as after infrastructure: touched %v, left %v, stray %v", touched, left, stray)
	}
	touched, left, stray := compareServers(kept, built, map[string]string{"g": "vpn-1 SHUTOFF", "n2": "os-md-0-b ACTIVE", "x": "other ACTIVE"})
	if len(touched) != 1 || !strings.Contains(touched[0], `is now "vpn-1 SHUTOFF"`) {
		t.Errorf("touched %v", touched)
	}
	if !slices.Equal(left, []string{"os-md-0-b ACTIVE (n2)"}) || !slices.Equal(stray, []string{"other ACTIVE (x)"}) {
		t.Errorf("left %v, stray %v", left, stray)
	}
	if touched, _, _ := compareServers(kept, built, nil); len(touched) != 1 || !strings.Contains(touched[0], `is now ""`) {
		t.Errorf("a kept server gone: %v", touched)
	}
	if got := serverNames(built); got != "os-md-0-a ACTIVE, os-md-0-b ACTIVE" {
		t.Errorf("serverNames: %q", got)
	}
}
