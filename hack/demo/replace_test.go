package main

import "testing"

// TestNormalizeGenerated: what differs between two undisturbed replace
// runs (generated names, template hashes, IDs, addresses, the endpoint's
// port, the gateway's name) reads the same after normalizeGenerated;
// fixed names stay.
func TestNormalizeGenerated(t *testing.T) {
	for _, c := range []struct{ a, b string }{
		{`KubeadmConfig tenant-a-md-0-5lckk-8pdwl: {"machine-template-hash":"2097845404-q2r95"}`,
			`KubeadmConfig tenant-a-md-0-fcsm4-n59jx: {"machine-template-hash":"2097845404-flsbw"}`},
		{`Machine tenant-a-os-md-0-79dv5-hdwvb: {"providerID":"openstack:///0b6f4a52-9a0e-4c8f-8d0c-5bb2a5b3c1aa"}`,
			`Machine tenant-a-os-md-0-mxcqp-qx54d: {"providerID":"openstack:///f1d2c3b4-1111-4222-8333-944455556666"}`},
		{`Cluster tenant-a: {"controlPlaneEndpoint":{"host":"127.0.0.1","port":35347}}`,
			`Cluster tenant-a: {"controlPlaneEndpoint":{"host":"127.0.0.9","port":37015}}`},
		{`OpenStackServer vpn-f7683d75: ACTIVE`, `OpenStackServer vpn-0a1b2c3d: ACTIVE`},
		{`{"bootstrapToken":{"apiServerEndpoint":"127.0.0.1:34247","caCertHashes":["sha256:dcd8"],"token":"bcjuv9.2uu3zphrbnc9zf1v"}}`,
			`{"bootstrapToken":{"apiServerEndpoint":"127.0.0.1:38393","caCertHashes":["sha256:9b7c"],"token":"5a013o.egxuzxdd0c5vlz2n"}}`},
	} {
		if x, y := normalizeGenerated(c.a), normalizeGenerated(c.b); x != y {
			t.Errorf("normalized differently:\n%s\n%s", x, y)
		}
	}
	if got := normalizeGenerated("MachineDeployment tenant-a-md-0"); got != "MachineDeployment tenant-a-md-0" {
		t.Errorf("a fixed name became %q", got)
	}
}
