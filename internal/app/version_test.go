package app

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionInfo(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/ferry-dev/ferry", Version: "(devel)"},
		Deps: []*debug.Module{
			{Path: "sigs.k8s.io/cluster-api", Version: "v1.9.6"},
			{Path: "golang.org/x/text", Version: "v0.43.0"},
			{Path: "github.com/go-git/go-git/v5", Version: "v5.0.0", Replace: &debug.Module{Path: "github.com/go-git/go-git/v5", Version: "v5.19.3"}},
		},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abc"}},
	}
	for _, tc := range []struct {
		linked, want, wantNot string
	}{
		{linked: "", want: "ferry reconciler (devel) 0123abc\n"},
		{linked: "v0.1.0", want: "ferry reconciler v0.1.0\n"},
		{want: "sigs.k8s.io/cluster-api", wantNot: "golang.org/x/text"},
		{want: "v5.19.3", wantNot: "v5.0.0"},
	} {
		var out bytes.Buffer
		if err := NewVersionInfo(tc.linked, bi).WriteText(&out); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), tc.want) || (tc.wantNot != "" && strings.Contains(out.String(), tc.wantNot)) {
			t.Errorf("version %q =\n%s\nwant it to contain %q and not %q", tc.linked, out.String(), tc.want, tc.wantNot)
		}
	}
}
