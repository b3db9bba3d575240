//go:build openstack

// These tests run against the real OpenStack services of
// hack/openstack-up.sh: `make test-openstack` starts them and runs these.

package openstack_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"

	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/openstack"
	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/ostest"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return c
}

func connect(t *testing.T, f *ostest.Fixture) *openstack.Client {
	t.Helper()
	c, err := openstack.Connect(ctx(t), f.Creds)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	return c
}

// TestOpenStack runs every check on one fixture: building it (project,
// networks, router, flavor, image, three servers) takes most of the time.
func TestOpenStack(t *testing.T) {
	f := ostest.New(t, "capi-quickstart")
	c := connect(t, f)

	t.Run("credentials from a Secret", func(t *testing.T) {
		creds, err := openstack.CredentialsFromSecret(map[string][]byte{"clouds.yaml": f.Creds.CloudsYAML}, "openstack")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := openstack.Connect(ctx(t), creds); err != nil {
			t.Fatalf("Connect with the Secret's clouds.yaml: %v", err)
		}
		if _, err := openstack.CredentialsFromSecret(map[string][]byte{"cacert": []byte("x")}, "openstack"); !failure.IsTerminal(err) {
			t.Errorf("a Secret without clouds.yaml: %v, want a terminal error", err)
		}
	})

	t.Run("wrong password is a terminal error", func(t *testing.T) {
		creds := f.Creds
		creds.CloudsYAML = f.CloudsYAML("not-the-password")
		start := time.Now()
		_, err := openstack.Connect(ctx(t), creds)
		if !errors.Is(err, openstack.ErrAuth) || !failure.IsTerminal(err) {
			t.Fatalf("Connect with a wrong password: %v; want terminal ErrAuth", err)
		}
		if strings.Contains(err.Error(), "not-the-password") {
			t.Errorf("the error shows the password: %v", err)
		}
		t.Logf("refused in %s: %v", time.Since(start).Round(time.Millisecond), err)
	})

	t.Run("unknown cloud name and bad CA are terminal", func(t *testing.T) {
		for _, creds := range []openstack.Credentials{
			{CloudsYAML: f.Creds.CloudsYAML, Cloud: "elsewhere"},
			{CloudsYAML: f.Creds.CloudsYAML, Cloud: "openstack", CACert: []byte("not a certificate")},
		} {
			if _, err := openstack.Connect(ctx(t), creds); !failure.IsTerminal(err) {
				t.Errorf("Connect(cloud %q): %v, want a terminal error", creds.Cloud, err)
			}
		}
	})

	t.Run("resolve names", func(t *testing.T) {
		for _, tc := range []struct {
			kind   openstack.Kind
			name   string
			wantID string
		}{
			{openstack.KindFlavor, f.Flavor, f.FlavorID},
			{openstack.KindImage, f.Image, f.ImageID},
			{openstack.KindNetwork, f.Network, f.NetworkID},
			{openstack.KindExternalNetwork, f.ExternalNetwork, f.ExternalNetworkID},
		} {
			id, err := c.Resolve(ctx(t), tc.kind, tc.name)
			if err != nil || id != tc.wantID {
				t.Errorf("Resolve(%s, %s) = %q, %v; want %s", tc.kind, tc.name, id, err, tc.wantID)
			}
		}
		if _, err := c.Resolve(ctx(t), openstack.KindSubnet, f.Subnet); err != nil {
			t.Errorf("Resolve(subnet): %v", err)
		}

		// Not external: as an external network it does not exist.
		var nf *openstack.NotFoundError
		if _, err := c.Resolve(ctx(t), openstack.KindExternalNetwork, f.Network); !errors.As(err, &nf) || !failure.IsTerminal(err) {
			t.Errorf("Resolve(externalNetwork, %s): %v; want a terminal NotFoundError", f.Network, err)
		}
		_, err := c.Resolve(ctx(t), openstack.KindFlavor, "m1.missing-"+f.Suffix)
		if !errors.As(err, &nf) || !strings.Contains(err.Error(), `no flavor named "m1.missing-`+f.Suffix+`"`) {
			t.Errorf("Resolve(missing flavor): %v; want it named", err)
		}

		// A second network with the same name makes the name ambiguous.
		twin, err := networks.Create(ctx(t), f.Admin().Network, networks.CreateOpts{Name: f.Network, ProjectID: f.ProjectID}).Extract()
		if err != nil {
			t.Fatal(err)
		}
		defer networks.Delete(context.Background(), f.Admin().Network, twin.ID)
		var amb *openstack.AmbiguousError
		_, err = c.Resolve(ctx(t), openstack.KindNetwork, f.Network)
		if !errors.As(err, &amb) || !failure.IsTerminal(err) || !slices.Contains(amb.IDs, twin.ID) || !slices.Contains(amb.IDs, f.NetworkID) {
			t.Fatalf("Resolve(two networks named %s): %v; want a terminal AmbiguousError with both IDs", f.Network, err)
		}
		if !strings.Contains(err.Error(), `2 networks are named "`+f.Network+`"`) {
			t.Errorf("message %q does not name the network", err)
		}
	})

	t.Run("keypair ensured twice", func(t *testing.T) {
		name := "capi-key-" + f.Suffix
		created, err := c.EnsureKeypair(ctx(t), name, f.PublicKey)
		if err != nil || !created {
			t.Fatalf("first EnsureKeypair = %t, %v; want created", created, err)
		}
		created, err = c.EnsureKeypair(ctx(t), name, f.PublicKey)
		if err != nil || created {
			t.Fatalf("second EnsureKeypair = %t, %v; want present, not created", created, err)
		}
		names, err := c.Keypairs(ctx(t))
		if err != nil || !slices.Contains(names, name) {
			t.Errorf("Keypairs = %v, %v; want %s", names, err, name)
		}
		if _, err := c.EnsureKeypair(ctx(t), name, ostest.PublicKey(t)); !errors.Is(err, openstack.ErrKeypairMismatch) || !failure.IsTerminal(err) {
			t.Errorf("EnsureKeypair with another key: %v; want terminal ErrKeypairMismatch", err)
		}
		if _, err := c.EnsureKeypair(ctx(t), "absent-"+f.Suffix, ""); !failure.IsTerminal(err) {
			t.Errorf("EnsureKeypair of a missing keypair without a key: %v; want terminal", err)
		}
	})

	t.Run("servers by node name", func(t *testing.T) {
		for nodeName, id := range f.Servers {
			got, err := c.ProviderID(ctx(t), nodeName)
			if err != nil || got != step.ProviderIDPrefix+id {
				t.Errorf("ProviderID(%s) = %q, %v; want openstack:///%s", nodeName, got, err, id)
			}
		}
		var nf *openstack.NotFoundError
		if _, err := c.ProviderID(ctx(t), "capi-quickstart-md-0-gone"); !errors.As(err, &nf) {
			t.Errorf("ProviderID(missing node): %v; want NotFoundError", err)
		}
		// Pages of one server: Nova's links are followed to the end.
		defer openstack.SetServerPage(1)()
		byName, err := c.Servers(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		for nodeName, id := range f.Servers {
			if byName[nodeName] != id {
				t.Errorf("Servers()[%s] = %q, want %s", nodeName, byName[nodeName], id)
			}
		}
	})

	t.Run("quota preflight", func(t *testing.T) {
		// The fixture's quota: 10 instances, 20 cores, 50 GiB; 3 servers of
		// 1 core and 512 MiB run.
		short, err := c.Shortfall(ctx(t), openstack.Need{Instances: 3, Cores: 3, RAMMiB: 1536})
		if err != nil || short != "" {
			t.Errorf("Shortfall(fits) = %q, %v; want none", short, err)
		}
		short, err = c.Shortfall(ctx(t), openstack.Need{Instances: 8, Cores: 2, RAMMiB: 1024})
		if err != nil || short != "instances: need 8, 7 of 10 left" {
			t.Errorf("Shortfall(8 instances) = %q, %v", short, err)
		}
		vcpus, ram, err := c.FlavorSize(ctx(t), f.Flavor)
		if err != nil || vcpus != 1 || ram != 512 {
			t.Errorf("FlavorSize = %d, %d, %v", vcpus, ram, err)
		}
	})

	t.Run("clean-up deletes only what ferry made", func(t *testing.T) {
		plan := "capi-quickstart-" + f.Suffix
		// Should the test stop half-way, what it made still goes.
		t.Cleanup(func() { _, _ = c.Cleanup(context.Background(), plan, nil) })
		gw, err := ostest.CreateActive(ctx(t), t, f.Admin().Compute, func(ctx context.Context) (string, error) {
			return c.CreateServer(ctx, openstack.ServerSpec{Name: "vpn-gateway-" + f.Suffix, FlavorID: f.FlavorID, ImageID: f.ImageID, NetworkID: f.NetworkID, Plan: plan})
		})
		if err != nil {
			t.Fatalf("gateway server: %v", err)
		}
		sg, err := c.CreateSecurityGroup(ctx(t), "ferry-temp-"+f.Suffix, plan)
		if err != nil {
			t.Fatal(err)
		}
		// The user's own group, with a name like ferry's: not tagged, kept.
		userSG, err := groups.Create(ctx(t), f.Admin().Network, groups.CreateOpts{Name: "ferry-temp-" + f.Suffix, ProjectID: f.ProjectID}).Extract()
		if err != nil {
			t.Fatal(err)
		}
		defer groups.Delete(context.Background(), f.Admin().Network, userSG.ID)
		key := "temp-key-" + f.Suffix
		if _, err := c.EnsureKeypair(ctx(t), key, f.PublicKey); err != nil {
			t.Fatal(err)
		}

		tagged, err := c.Tagged(ctx(t), plan)
		if err != nil || len(tagged) != 2 {
			t.Fatalf("Tagged = %v, %v; want the gateway and the group", tagged, err)
		}
		recorded := []openstack.Resource{{Kind: openstack.ResourceKeypair, Name: key}}
		deleted, err := c.Cleanup(ctx(t), plan, recorded)
		if err != nil {
			t.Fatal(err)
		}
		want := []openstack.Resource{
			{Kind: openstack.ResourceSecurityGroup, ID: sg, Name: "ferry-temp-" + f.Suffix},
			{Kind: openstack.ResourceServer, ID: gw, Name: "vpn-gateway-" + f.Suffix},
			{Kind: openstack.ResourceKeypair, Name: key},
		}
		if !slices.Equal(deleted, want) {
			t.Errorf("Cleanup deleted %v, want %v", deleted, want)
		}
		// The cluster's servers and the user's group are still there.
		for nodeName, id := range f.Servers {
			if _, err := servers.Get(ctx(t), f.Admin().Compute, id).Extract(); err != nil {
				t.Errorf("server %s of the cluster: %v", nodeName, err)
			}
		}
		if _, err := groups.Get(ctx(t), f.Admin().Network, userSG.ID).Extract(); err != nil {
			t.Errorf("the user's security group: %v", err)
		}
		// Run twice: nothing left, nothing else touched.
		deleted, err = c.Cleanup(ctx(t), plan, nil)
		if err != nil || len(deleted) != 0 {
			t.Errorf("second Cleanup = %v, %v; want nothing", deleted, err)
		}
	})

	// The local Nova fails a build now and then; ostest.CreateActive makes
	// a server again when its build failed, and leaves none behind. A
	// flavor that requires a trait no host has fails every build.
	t.Run("a failed build is made again, then reported", func(t *testing.T) {
		admin := f.Admin().Compute
		fl, err := flavors.Create(ctx(t), admin, flavors.CreateOpts{Name: "nowhere-" + f.Suffix, VCPUs: 1, RAM: 512, Disk: gophercloud.IntToPointer(1)}).Extract()
		if err != nil {
			t.Fatal(err)
		}
		defer flavors.Delete(context.Background(), admin, fl.ID)
		if _, err := flavors.CreateExtraSpecs(ctx(t), admin, fl.ID, flavors.ExtraSpecsOpts{"trait:CUSTOM_FERRY_NOWHERE": "required"}).Extract(); err != nil {
			t.Fatal(err)
		}
		var made []string
		_, err = ostest.CreateActive(ctx(t), t, admin, func(ctx context.Context) (string, error) {
			s, err := servers.Create(ctx, admin, servers.CreateOpts{Name: "nowhere-" + f.Suffix, FlavorRef: fl.ID, ImageRef: f.ImageID, Networks: []servers.Network{{UUID: f.NetworkID}}}, nil).Extract()
			if err != nil {
				return "", err
			}
			made = append(made, s.ID)
			return s.ID, nil
		})
		if err == nil || !strings.Contains(err.Error(), "attempt 3: ") || !strings.Contains(err.Error(), "went to ERROR: No valid host") {
			t.Errorf("CreateActive = %v, want three attempts that went to ERROR (no valid host)", err)
		}
		if len(made) != 3 {
			t.Errorf("made %d servers, want 3", len(made))
		}
		for _, id := range made {
			if _, err := servers.Get(ctx(t), admin, id).Extract(); !gophercloud.ResponseCodeIs(err, 404) {
				t.Errorf("failed server %s left behind: %v", id, err)
			}
		}
	})
}
