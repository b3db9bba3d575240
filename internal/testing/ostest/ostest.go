package ostest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gcopenstack "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"

	"github.com/ferry-dev/ferry/internal/openstack"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// Fixture is a project of the local cloud, populated for one test.
type Fixture struct {
	// Creds authenticate as the project's user (role member), the way a
	// CAPO identity Secret would.
	Creds openstack.Credentials
	// Password is the project user's password.
	Password string
	// ProjectID is the project's ID.
	ProjectID string
	// Suffix makes this fixture's names unique.
	Suffix string
	// Names and IDs of what was created.
	ExternalNetwork, Network, Subnet string
	ExternalNetworkID, NetworkID     string
	Flavor, Image                    string
	FlavorID, ImageID                string
	// Servers maps the node names of the adopted cluster to server IDs.
	Servers map[string]string
	// Addresses maps the node names to their servers' fixed IPs.
	Addresses map[string]string
	// PublicKey is a fresh OpenSSH public key for keypair tests.
	PublicKey string

	admin *Admin
}

// Admin holds the admin's service clients.
type Admin struct {
	Compute, Network, Image, Identity *gophercloud.ServiceClient
	// AuthURL is Keystone's, from the admin's clouds.yaml: on the
	// address hack/openstack-up.sh --address, which pods on real nodes
	// reach too.
	AuthURL string
}

// Node names the fixture's servers take, after the cluster prefix.
var NodeSuffixes = []string{"control-plane-0", "md-0-a", "md-0-b"}

// CloudsFile returns the admin clouds.yaml that hack/openstack-up.sh wrote.
func CloudsFile(t testenv.T) string {
	t.Helper()
	if f := os.Getenv("FERRY_OPENSTACK_CLOUDS"); f != "" {
		return f
	}
	script := filepath.Join(testenv.RepoRoot(t), "hack", "openstack-up.sh")
	out, err := exec.Command(script, "--clouds").Output()
	if err != nil {
		t.Fatalf("ostest: %s --clouds: %v", script, err)
	}
	return strings.TrimSpace(string(out))
}

// NewAdmin authenticates as the local cloud's admin. It fails the test
// with what to run when the services are not up.
func NewAdmin(t testenv.T) *Admin {
	t.Helper()
	path := CloudsFile(t)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("ostest: no local OpenStack (%v): run `make test-openstack`, which starts it with hack/openstack-up.sh", err)
	}
	opts, eo, _, err := clouds.Parse(clouds.WithLocations(path), clouds.WithCloudName("ferry-admin"))
	if err != nil {
		t.Fatalf("ostest: parse %s: %v", path, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	provider, err := gcopenstack.AuthenticatedClient(ctx, opts)
	if err != nil {
		t.Fatalf("ostest: authenticate as admin with %s: %v (is hack/openstack-up.sh running?)", path, err)
	}
	a := &Admin{AuthURL: opts.IdentityEndpoint}
	must := func(c *gophercloud.ServiceClient, err error) *gophercloud.ServiceClient {
		t.Helper()
		if err != nil {
			t.Fatalf("ostest: service client: %v", err)
		}
		return c
	}
	a.Compute = must(gcopenstack.NewComputeV2(provider, eo))
	a.Network = must(gcopenstack.NewNetworkV2(provider, eo))
	a.Image = must(gcopenstack.NewImageV2(provider, eo))
	a.Identity = must(gcopenstack.NewIdentityV3(provider, eo))
	return a
}

// New builds a fixture for clusterName: a project and user, networks, a
// router, a flavor, an image and one ACTIVE server per NodeSuffixes entry,
// named <clusterName>-<suffix>. It removes them when the test ends.
func New(t testenv.T, clusterName string) *Fixture {
	t.Helper()
	return newFixture(t, clusterName, NodeSuffixes)
}

// newFixture is New with the servers' name suffixes.
func newFixture(t testenv.T, clusterName string, suffixes []string) *Fixture {
	t.Helper()
	a := NewAdmin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f := &Fixture{admin: a, Suffix: randomHex(t, 3), Servers: map[string]string{}}
	b := &builder{t: t, a: a, f: f}
	b.project(ctx)
	b.networks(ctx)
	b.flavorAndImage(ctx)
	f.PublicKey = PublicKey(t)
	b.servers(ctx, clusterName, suffixes)
	b.addresses(ctx)
	return f
}

// CloudsYAML renders a clouds.yaml for the fixture's user with password;
// a wrong password makes one that the cloud refuses.
func (f *Fixture) CloudsYAML(password string) []byte {
	return []byte(fmt.Sprintf(`clouds:
  openstack:
    auth:
      auth_url: %s
      username: ferry-test-%s
      password: %q
      project_id: %s
      user_domain_id: default
    region_name: RegionOne
    identity_api_version: 3
`, f.admin.AuthURL, f.Suffix, password, f.ProjectID))
}

// UserCompute returns a compute client authenticated as the project's user.
func (f *Fixture) UserCompute(t testenv.T) *gophercloud.ServiceClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts, eo, _, err := clouds.Parse(clouds.WithCloudsYAML(bytes.NewReader(f.Creds.CloudsYAML)), clouds.WithCloudName("openstack"))
	if err != nil {
		t.Fatalf("ostest: %v", err)
	}
	provider, err := gcopenstack.AuthenticatedClient(ctx, opts)
	if err != nil {
		t.Fatalf("ostest: authenticate as the project user: %v", err)
	}
	c, err := gcopenstack.NewComputeV2(provider, eo)
	if err != nil {
		t.Fatalf("ostest: %v", err)
	}
	return c
}

// Admin returns the admin clients the fixture was built with.
func (f *Fixture) Admin() *Admin { return f.admin }
