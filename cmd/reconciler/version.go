package main

import (
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
)

// version is set at link time by `make build` (-X main.version=...); a plain
// `go build` falls back to what the Go toolchain recorded.
var version string

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

func versionCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = &debug.BuildInfo{}
	}
	writeVersion(stdout, version, bi)
	return 0
}

// writeVersion prints ferry's version (the link-time one, else the module
// version, else the VCS revision), the Go version, and the key modules that
// are linked in.
func writeVersion(w io.Writer, linked string, bi *debug.BuildInfo) {
	v := linked
	if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	if v == "" {
		v = "(devel)"
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				v = "(devel) " + s.Value
			}
		}
	}
	fmt.Fprintf(w, "ferry reconciler %s\n", v)
	if bi.GoVersion != "" {
		fmt.Fprintf(w, "  %-44s %s\n", "go", bi.GoVersion)
	}
	for _, dep := range bi.Deps {
		if !slices.Contains(keyModules, dep.Path) {
			continue
		}
		if dep.Replace != nil {
			dep = dep.Replace
		}
		fmt.Fprintf(w, "  %-44s %s\n", dep.Path, dep.Version)
	}
}
