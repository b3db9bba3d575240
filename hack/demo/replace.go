package main

import (
	"context"
	"regexp"
	"strings"
	"sync"

	"github.com/ferry-dev/ferry/internal/testing/ostest"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// vpnClientPath is the VPN overlay's client DaemonSet in the plans
// repository: the network-bridge phase runs it on every node, old and new.
const vpnClientPath = "manifests/vpn-client.yaml"

// replaceWorkers is how many nodes the old pool has, and the new one.
const replaceWorkers = 3

// buildReplace builds a seed 003 cluster (its workers on CAPD machines,
// its control plane hosted), runs the web application on it under a
// budget of one disruption, and a probe in front of it; the plan brings a
// VPN gateway server (seed 002) and the VPN client.
func buildReplace(ctx context.Context, r *testenv.Program, out *display) (*fixture, error) {
	out.say("==> building the cluster to move: a hosted control plane, %d workers on CAPD machines, a project in the local OpenStack, two API servers", replaceWorkers)
	out.say("    with the real Cluster API and CAPO managers, real kubelets on two networks (the old cloud's and OpenStack's, whose pods reach each other only through the plan's VPN overlay), and the labelled stand-ins for CAPD's and Kamaji's controllers and for the new servers' boot")
	f := ostest.NewReplaceable(r, "tenant-a", replaceWorkers)
	out.say("    old nodes: %s", strings.Join(f.OldNodes, ", "))
	out.say("==> running the application: Deployment web (3 replicas) under PodDisruptionBudget web (maxUnavailable 1), and a probe of its public URL")
	if err := f.Workload.RunWeb(ctx); err != nil {
		return nil, err
	}
	p := f.Workload.NewProbe()
	r.Cleanup(p.Close)
	out.say("    probe: %s/healthz (200 while a web pod serves)", p.URL)
	caller, err := f.RunCaller(ctx)
	if err != nil {
		return nil, err
	}
	out.say("    caller: pod %s on %s, an old-cloud node of no Machine, calls Service web every 100 ms (its counts follow each phase)", caller.Pod, f.Edge)
	extra := "  manifests:\n    vpnOverlay: [" + vpnClientPath + "]\n" +
		"  cutover: {drainTimeout: 60s, probeURL: \"" + p.URL + "/healthz\"}\n"
	gateway := "    gateway: {name: vpn, flavor: " + f.Flavor + ", image: " + f.Image + "}\n"
	// The least healthy count runs from now until the checks read it.
	watchCtx, stopWatch := context.WithCancel(context.Background())
	r.Cleanup(stopWatch)
	d := &drainWatch{f: f, probe: p, caller: caller, least: onceInt(f.Workload.WatchLeastHealthy(watchCtx, "default", testenv.WebLabels))}
	return &fixture{
		cloud:     &ostest.Adoptable{Fixture: f.Fixture, Name: f.Name, Mgmt: f.Mgmt, Workload: f.Workload, PKI: f.PKI},
		plan:      func(approve, more string) string { return f.Plan(approve, replaceWorkers, gateway, extra+more) },
		files:     map[string]string{vpnClientPath: testenv.VPNClientManifest},
		checks:    func(ctx context.Context) []ostest.Check { return d.checks(ctx) },
		normalize: normalizeGenerated,
		drain:     d,
		progress: func(ctx context.Context) string {
			return "the caller on " + f.Edge + ": " + f.Calls(ctx, caller)
		},
	}, nil
}

// onceInt calls f once, the first time the returned function is called,
// and returns its result every time (WatchLeastHealthy's stop may be
// called only once).
func onceInt(f func() int) func() int {
	var once sync.Once
	var n int
	return func() int {
		once.Do(func() { n = f() })
		return n
	}
}

// Names and values that differ between two runs of the replace scenario:
// what the Cluster API controllers generate (MachineSets, Machines and
// everything named after them: random suffixes from the Kubernetes name
// generator's alphabet), and the new servers' IDs and addresses.
var (
	generatedName = regexp.MustCompile(`((?:os|tenant-a)-md-0)((?:-[bcdfghjklmnpqrstvwxz2456789]{5})+)\b`)
	uuid          = regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	ipv4          = regexp.MustCompile(`\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b`)
	// The MachineSets' template hash, the workload API server's random
	// port in the Cluster's endpoint, and the gateway server's name (a
	// hash of its spec, which names the fixture's flavor and image).
	templateHash     = regexp.MustCompile(`("machine-template-hash":)"[^"]*"`)
	endpointPortJSON = regexp.MustCompile(`("controlPlaneEndpoint":\{"host":"<ip>","port":)\d+`)
	gatewayName      = regexp.MustCompile(`\bvpn-[0-9a-f]{8}\b`)
	// A KubeadmConfig's join discovery: the endpoint's port, the
	// cluster's CA hash and the bootstrap token, each new per fixture.
	joinPort     = regexp.MustCompile(`("apiServerEndpoint":"<ip>:)\d+`)
	caCertHashes = regexp.MustCompile(`("caCertHashes":)\[[^\]]*\]`)
	joinToken    = regexp.MustCompile(`\b[a-z0-9]{6}\.[a-z0-9]{16}\b`)
)

// normalizeGenerated writes generated names, IDs and addresses as
// placeholders: the end states of two runs then compare as multisets of
// lines (three new Machines are three equal lines).
func normalizeGenerated(s string) string {
	s = generatedName.ReplaceAllString(s, "${1}-<generated>")
	s = uuid.ReplaceAllString(s, "<id>")
	s = ipv4.ReplaceAllString(s, "<ip>")
	s = templateHash.ReplaceAllString(s, `$1"<hash>"`)
	s = endpointPortJSON.ReplaceAllString(s, `${1}"<port>"`)
	s = joinPort.ReplaceAllString(s, "${1}<port>")
	s = caCertHashes.ReplaceAllString(s, `$1["<ca-hash>"]`)
	s = joinToken.ReplaceAllString(s, "<bootstrap-token>")
	return gatewayName.ReplaceAllString(s, "vpn-<hash>")
}
