// Package ostest builds test fixtures in the local OpenStack that
// hack/openstack-up.sh runs: a project and its user, an external network
// with a subnet, a tenant network with a router, flavors, an image, and
// servers named like the nodes of a cluster being adopted. Everything is
// created through gophercloud as the cloud's admin, with names unique to the
// test, and removed when the test ends.
//
// A test that uses it fails, rather than skips, when the services are not
// running: `make test-openstack` starts them.
package ostest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gcopenstack "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/quotasets"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/projects"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/roles"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/users"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/imagedata"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/external"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	"golang.org/x/crypto/ssh"

	"github.com/ferry-dev/ferry/internal/openstack"
	"github.com/ferry-dev/ferry/internal/testenv"
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
}

// Node names the fixture's servers take, after the cluster prefix.
var NodeSuffixes = []string{"control-plane-0", "md-0-a", "md-0-b"}

// CloudsFile returns the admin clouds.yaml that hack/openstack-up.sh wrote.
func CloudsFile(t testenv.T) string {
	t.Helper()
	if f := os.Getenv("FERRY_OPENSTACK_CLOUDS"); f != "" {
		return f
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "..", "hack", "openstack-up.sh")
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
	a := &Admin{}
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
	a := NewAdmin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f := &Fixture{admin: a, Suffix: randomHex(t, 3), Servers: map[string]string{}}
	name := func(base string) string { return base + "-" + f.Suffix }
	// cleanup registers a deletion; it is retried a few times because the
	// services on SQLite answer 500 ("database is locked") or 409 (a port
	// still bound) now and then while other deletions run.
	cleanup := func(what string, fn func() error) {
		t.Cleanup(func() {
			var err error
			for range 5 {
				if err = fn(); err == nil || gophercloud.ResponseCodeIs(err, 404) {
					return
				}
				time.Sleep(time.Second)
			}
			t.Logf("ostest: clean up %s: %v", what, err)
		})
	}
	fatal := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("ostest: %s: %v", what, err)
		}
	}

	// Project and user.
	p, err := projects.Create(ctx, a.Identity, projects.CreateOpts{Name: name("ferry-test"), DomainID: "default"}).Extract()
	fatal("create project", err)
	f.ProjectID = p.ID
	cleanup("project", func() error { return projects.Delete(context.Background(), a.Identity, p.ID).ExtractErr() })
	f.Password = randomHex(t, 12)
	u, err := users.Create(ctx, a.Identity, users.CreateOpts{Name: name("ferry-test"), DomainID: "default", Password: f.Password, DefaultProjectID: p.ID}).Extract()
	fatal("create user", err)
	cleanup("user", func() error { return users.Delete(context.Background(), a.Identity, u.ID).ExtractErr() })
	member := roleID(ctx, t, a, "member")
	fatal("assign role member", roles.Assign(ctx, a.Identity, member, roles.AssignOpts{UserID: u.ID, ProjectID: p.ID}).ExtractErr())
	_, err = quotasets.Update(ctx, a.Compute, p.ID, quotasets.UpdateOpts{Instances: gophercloud.IntToPointer(10), Cores: gophercloud.IntToPointer(20), RAM: gophercloud.IntToPointer(51200)}).Extract()
	fatal("set compute quota", err)
	f.Creds = openstack.Credentials{Cloud: "openstack", CloudsYAML: f.CloudsYAML(f.Password)}

	// Networks: an external one with a subnet, and the cluster's network
	// with a subnet and a router to the external one.
	f.ExternalNetwork, f.Network, f.Subnet = name("public"), name("k8s-net"), name("k8s-subnet")
	ext, err := networks.Create(ctx, a.Network, external.CreateOptsExt{
		CreateOptsBuilder: networks.CreateOpts{Name: f.ExternalNetwork, ProjectID: p.ID},
		External:          gophercloud.Enabled,
	}).Extract()
	fatal("create external network", err)
	f.ExternalNetworkID = ext.ID
	cleanup("external network", func() error { return networks.Delete(context.Background(), a.Network, ext.ID).ExtractErr() })
	// The external subnet is on loopback, 127.<n>.<m>.0/24, without DHCP
	// (Neutron refuses a loopback subnet with it): a floating IP from it
	// is an address of this machine, where a test's API server can listen
	// as a cluster's endpoint does on its floating IP.
	_, err = subnets.Create(ctx, a.Network, subnets.CreateOpts{NetworkID: ext.ID, Name: name("public-subnet"), CIDR: loopbackCIDR(t),
		IPVersion: 4, ProjectID: p.ID, EnableDHCP: gophercloud.Disabled}).Extract()
	fatal("create external subnet", err)
	net, err := networks.Create(ctx, a.Network, networks.CreateOpts{Name: f.Network, ProjectID: p.ID}).Extract()
	fatal("create network", err)
	f.NetworkID = net.ID
	cleanup("network", func() error { return networks.Delete(context.Background(), a.Network, net.ID).ExtractErr() })
	sub, err := subnets.Create(ctx, a.Network, subnets.CreateOpts{NetworkID: net.ID, Name: f.Subnet, CIDR: "10.6.0.0/24", IPVersion: 4, ProjectID: p.ID}).Extract()
	fatal("create subnet", err)
	r, err := routers.Create(ctx, a.Network, routers.CreateOpts{Name: name("k8s-router"), ProjectID: p.ID, GatewayInfo: &routers.GatewayInfo{NetworkID: ext.ID}}).Extract()
	fatal("create router", err)
	cleanup("router", func() error { return routers.Delete(context.Background(), a.Network, r.ID).ExtractErr() })
	_, err = routers.AddInterface(ctx, a.Network, r.ID, routers.AddInterfaceOpts{SubnetID: sub.ID}).Extract()
	fatal("attach router to subnet", err)
	cleanup("router interface", func() error {
		_, err := routers.RemoveInterface(context.Background(), a.Network, r.ID, routers.RemoveInterfaceOpts{SubnetID: sub.ID}).Extract()
		return err
	})

	// A flavor and an image.
	f.Flavor, f.Image = name("ferry.small"), name("ubuntu-2204-kube")
	fl, err := flavors.Create(ctx, a.Compute, flavors.CreateOpts{Name: f.Flavor, VCPUs: 1, RAM: 512, Disk: gophercloud.IntToPointer(1)}).Extract()
	fatal("create flavor", err)
	f.FlavorID = fl.ID
	cleanup("flavor", func() error { return flavors.Delete(context.Background(), a.Compute, fl.ID).ExtractErr() })
	public := images.ImageVisibilityPublic
	img, err := images.Create(ctx, a.Image, images.CreateOpts{Name: f.Image, Visibility: &public, ContainerFormat: "bare", DiskFormat: "raw"}).Extract()
	fatal("create image", err)
	f.ImageID = img.ID
	cleanup("image", func() error { return images.Delete(context.Background(), a.Image, img.ID).ExtractErr() })
	fatal("upload image", imagedata.Upload(ctx, a.Image, img.ID, bytes.NewReader(make([]byte, 1024))).ExtractErr())

	f.PublicKey = PublicKey(t)

	// Servers named like the nodes of the cluster being adopted, in the
	// project, as its user creates them; one at a time, which the services
	// on SQLite take better than a burst.
	user := f.UserCompute(t)
	// Every server and port of the project goes, also those that CAPO
	// made when a test scaled a pool up.
	cleanup("servers and ports", func() error { return f.deleteAll(a) })
	for _, s := range NodeSuffixes {
		nodeName := clusterName + "-" + s + "-" + f.Suffix
		_, err := CreateActive(ctx, t, user, func(ctx context.Context) (string, error) {
			srv, err := servers.Create(ctx, user, servers.CreateOpts{
				Name: nodeName, FlavorRef: fl.ID, ImageRef: img.ID, Networks: []servers.Network{{UUID: net.ID}},
			}, nil).Extract()
			if err != nil {
				return "", err
			}
			f.Servers[nodeName] = srv.ID // the last attempt's; cleaned up even if the test stops while it builds
			return srv.ID, nil
		})
		fatal("server "+nodeName, err)
	}
	// The servers' fixed IPs, which their nodes report as InternalIP.
	ports, err := f.ProjectPorts(ctx)
	fatal("list the servers' ports", err)
	f.Addresses = map[string]string{}
	for name, id := range f.Servers {
		for _, p := range ports {
			if p.DeviceID == id && len(p.FixedIPs) > 0 {
				f.Addresses[name] = p.FixedIPs[0].IPAddress
			}
		}
	}
	return f
}

// buildAttempts and buildTimeout bound CreateActive: the local Nova runs
// on SQLite, and now and then a build fails with "database is locked" (the
// server goes to ERROR) or is left in BUILD.
const (
	buildAttempts = 3
	buildTimeout  = 2 * time.Minute
)

// CreateActive creates a server with create and waits for it to be ACTIVE.
// A server whose build fails or does not end within buildTimeout is
// deleted and created again, up to buildAttempts times in all; the error
// names each attempt's server, status and fault.
func CreateActive(ctx context.Context, t testenv.T, c *gophercloud.ServiceClient, create func(context.Context) (string, error)) (string, error) {
	t.Helper()
	var errs []error
	for attempt := 1; attempt <= buildAttempts; attempt++ {
		id, err := create(ctx)
		if err != nil {
			return "", fmt.Errorf("create: %w", err)
		}
		wctx, cancel := context.WithTimeout(ctx, buildTimeout)
		err = WaitActive(wctx, c, id)
		cancel()
		if err == nil {
			return id, nil
		}
		errs = append(errs, fmt.Errorf("attempt %d: %w", attempt, err))
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		derr := deleteServers(dctx, c, map[string]string{id: id})
		cancel()
		if derr != nil {
			t.Logf("ostest: delete failed build: %v", derr)
		}
		if ctx.Err() != nil {
			break
		}
		if attempt < buildAttempts {
			t.Logf("ostest: %v; trying again", err)
		}
	}
	return "", errors.Join(errs...)
}

// WaitActive waits until server id is ACTIVE. A server that goes to ERROR
// ends the wait at once, with Nova's fault.
func WaitActive(ctx context.Context, c *gophercloud.ServiceClient, id string) error {
	for {
		s, err := servers.Get(ctx, c, id).Extract()
		if err != nil {
			return fmt.Errorf("server %s: %w", id, err)
		}
		switch s.Status {
		case "ACTIVE":
			return nil
		case "ERROR":
			return fmt.Errorf("server %s went to ERROR: %s", id, strings.TrimSpace(s.Fault.Message))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("server %s still %s (task %q): %w", id, s.Status, s.TaskState, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// deleteAll deletes the project's servers, waits until Nova has removed
// them, and deletes the ports left on its networks (a port that CAPO made
// outlives its server).
func (f *Fixture) deleteAll(a *Admin) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ids := map[string]string{}
	maps.Copy(ids, f.Servers)
	list, err := f.ProjectServers(ctx)
	if err != nil {
		return err
	}
	for _, s := range list {
		ids[s.ID] = s.ID
	}
	if err := deleteServers(ctx, a.Compute, ids); err != nil {
		return err
	}
	for _, net := range []string{f.NetworkID, f.ExternalNetworkID} {
		pages, err := ports.List(a.Network, ports.ListOpts{NetworkID: net}).AllPages(ctx)
		if err != nil {
			return err
		}
		left, err := ports.ExtractPorts(pages)
		if err != nil {
			return err
		}
		for _, p := range left {
			if p.DeviceOwner == "" || strings.HasPrefix(p.DeviceOwner, "compute:") {
				if err := ports.Delete(ctx, a.Network, p.ID).ExtractErr(); err != nil && !gophercloud.ResponseCodeIs(err, 404) {
					return err
				}
			}
		}
	}
	return nil
}

// ProjectServers lists the fixture project's servers, as its admin sees
// them.
func (f *Fixture) ProjectServers(ctx context.Context) ([]servers.Server, error) {
	pages, err := servers.List(f.admin.Compute, servers.ListOpts{AllTenants: true, TenantID: f.ProjectID}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the servers of project %s: %w", f.ProjectID, err)
	}
	return servers.ExtractServers(pages)
}

// ProjectPorts lists the ports on the fixture's cluster network.
func (f *Fixture) ProjectPorts(ctx context.Context) ([]ports.Port, error) {
	pages, err := ports.List(f.admin.Network, ports.ListOpts{NetworkID: f.NetworkID}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the ports of network %s: %w", f.NetworkID, err)
	}
	return ports.ExtractPorts(pages)
}

// deleteServers deletes servers and waits until Nova has removed them.
func deleteServers(ctx context.Context, c *gophercloud.ServiceClient, ids map[string]string) error {
	for _, id := range ids {
		if err := servers.Delete(ctx, c, id).ExtractErr(); err != nil && !gophercloud.ResponseCodeIs(err, 404) {
			return err
		}
	}
	for _, id := range ids {
		for {
			_, err := servers.Get(ctx, c, id).Extract()
			if gophercloud.ResponseCodeIs(err, 404) {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("server %s not deleted: %w", id, ctx.Err())
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	return nil
}

// CloudsYAML renders a clouds.yaml for the fixture's user with password;
// a wrong password makes one that the cloud refuses.
func (f *Fixture) CloudsYAML(password string) []byte {
	return []byte(fmt.Sprintf(`clouds:
  openstack:
    auth:
      auth_url: http://127.0.0.1:5050/v3
      username: ferry-test-%s
      password: %q
      project_id: %s
      user_domain_id: default
    region_name: RegionOne
    identity_api_version: 3
`, f.Suffix, password, f.ProjectID))
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

// PublicKey returns a fresh OpenSSH ed25519 public key.
func PublicKey(t testenv.T) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))) + " ferry-test"
}

func roleID(ctx context.Context, t testenv.T, a *Admin, name string) string {
	t.Helper()
	pages, err := roles.List(a.Identity, roles.ListOpts{Name: name}).AllPages(ctx)
	if err != nil {
		t.Fatalf("ostest: list roles: %v", err)
	}
	all, err := roles.ExtractRoles(pages)
	if err != nil || len(all) == 0 {
		t.Fatalf("ostest: role %q not found (%v)", name, err)
	}
	return all[0].ID
}

// loopbackCIDR picks a /24 of 127.0.0.0/8 away from 127.0.0.x.
func loopbackCIDR(t testenv.T) string {
	b := make([]byte, 2)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("ostest: %v", err)
	}
	return fmt.Sprintf("127.%d.%d.0/24", 100+int(b[0])%100, b[1])
}

func randomHex(t testenv.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
