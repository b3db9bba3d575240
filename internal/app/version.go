package app

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
)

// keyModules are the libraries whose versions decide ferry's behaviour
// against its backends; `reconciler version` lists them for bug reports.
var keyModules = []string{
	"sigs.k8s.io/cluster-api",
	"sigs.k8s.io/cluster-api-provider-openstack",
	"sigs.k8s.io/controller-runtime",
	"k8s.io/client-go",
	"github.com/gophercloud/gophercloud/v2",
	"github.com/nats-io/nats.go",
	"github.com/nats-io/nats-server/v2",
	"github.com/go-git/go-git/v5",
	"github.com/google/go-github/v60",
}

// VersionConfig is the configuration of `reconciler version`.
type VersionConfig struct {
	Streams
	// Linked is the version set at link time (-X main.version=...); empty:
	// what the Go toolchain recorded.
	Linked string
	// Output is text, json or yaml (VersionInfo).
	Output string
}

// VersionInfo is ferry's version, the Go version, and the versions of the
// key modules linked in.
type VersionInfo struct {
	Version   string   `json:"version"`
	GoVersion string   `json:"goVersion,omitempty"`
	Modules   []Module `json:"modules,omitempty"`
}

// Module is a module linked into the binary.
type Module struct {
	Path    string `json:"path"`
	Version string `json:"version"`
}

// Version prints the version of ferry and of the libraries it was built
// with.
func Version(_ context.Context, cfg VersionConfig) error {
	if err := checkOutput(cfg.Output); err != nil {
		return err
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = &debug.BuildInfo{}
	}
	v := NewVersionInfo(cfg.Linked, bi)
	return write(cfg.Out, cfg.Output, v, v.WriteText)
}

// NewVersionInfo is ferry's version (the link-time one, else the module
// version, else the VCS revision), the Go version, and the key modules
// that bi lists.
func NewVersionInfo(linked string, bi *debug.BuildInfo) VersionInfo {
	v := VersionInfo{Version: linked, GoVersion: bi.GoVersion}
	if v.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v.Version = bi.Main.Version
	}
	if v.Version == "" {
		v.Version = "(devel)"
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				v.Version = "(devel) " + s.Value
			}
		}
	}
	for _, dep := range bi.Deps {
		if !slices.Contains(keyModules, dep.Path) {
			continue
		}
		if dep.Replace != nil {
			dep = dep.Replace
		}
		v.Modules = append(v.Modules, Module{Path: dep.Path, Version: dep.Version})
	}
	return v
}

// WriteText prints v as `reconciler version` does by default.
func (v VersionInfo) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "ferry reconciler %s\n", v.Version)
	if v.GoVersion != "" {
		fmt.Fprintf(w, "  %-44s %s\n", "go", v.GoVersion)
	}
	for _, m := range v.Modules {
		if _, err := fmt.Fprintf(w, "  %-44s %s\n", m.Path, m.Version); err != nil {
			return err
		}
	}
	return nil
}
