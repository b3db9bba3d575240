// Building a fixture: the project and its user, networks, a flavor and an
// image, and the servers, each kind in turn, with its deletion registered as
// soon as it exists.

package ostest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/quotasets"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/projects"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/roles"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/users"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/imagedata"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/external"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	"golang.org/x/crypto/ssh"

	"github.com/ferry-dev/ferry/internal/openstack"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// builder creates a fixture's resources, one kind at a time, in the order
// they depend on each other, and registers each one's deletion as soon as
// it exists.
type builder struct {
	t testenv.T
	a *Admin
	f *Fixture
}

// name makes base unique to the fixture.
func (b *builder) name(base string) string { return base + "-" + b.f.Suffix }

// cleanup registers a deletion; it is retried a few times because the
// services on SQLite answer 500 ("database is locked") or 409 (a port
// still bound) now and then while other deletions run.
func (b *builder) cleanup(what string, fn func() error) {
	b.t.Cleanup(func() {
		var err error
		for range 5 {
			if err = fn(); err == nil || gophercloud.ResponseCodeIs(err, 404) {
				return
			}
			time.Sleep(time.Second)
		}
		b.t.Logf("ostest: clean up %s: %v", what, err)
	})
}

// fatal ends the test when what failed.
func (b *builder) fatal(what string, err error) {
	b.t.Helper()
	if err != nil {
		b.t.Fatalf("ostest: %s: %v", what, err)
	}
}

// project creates the project and its user with the member role and room
// for a few servers, and the credentials a CAPO identity Secret would hold.
func (b *builder) project(ctx context.Context) {
	a, f := b.a, b.f
	p, err := projects.Create(ctx, a.Identity, projects.CreateOpts{Name: b.name("ferry-test"), DomainID: "default"}).Extract()
	b.fatal("create project", err)
	f.ProjectID = p.ID
	b.cleanup("project", func() error { return projects.Delete(context.Background(), a.Identity, p.ID).ExtractErr() })
	f.Password = randomHex(b.t, 12)
	u, err := users.Create(ctx, a.Identity, users.CreateOpts{Name: b.name("ferry-test"), DomainID: "default", Password: f.Password, DefaultProjectID: p.ID}).Extract()
	b.fatal("create user", err)
	b.cleanup("user", func() error { return users.Delete(context.Background(), a.Identity, u.ID).ExtractErr() })
	member := roleID(ctx, b.t, a, "member")
	b.fatal("assign role member", roles.Assign(ctx, a.Identity, member, roles.AssignOpts{UserID: u.ID, ProjectID: p.ID}).ExtractErr())
	_, err = quotasets.Update(ctx, a.Compute, p.ID, quotasets.UpdateOpts{Instances: gophercloud.IntToPointer(10), Cores: gophercloud.IntToPointer(20), RAM: gophercloud.IntToPointer(51200)}).Extract()
	b.fatal("set compute quota", err)
	f.Creds = openstack.Credentials{Cloud: "openstack", CloudsYAML: f.CloudsYAML(f.Password)}
}

// networks creates an external network with a subnet, and the cluster's
// network with a subnet and a router to the external one.
func (b *builder) networks(ctx context.Context) {
	a, f := b.a, b.f
	f.ExternalNetwork, f.Network, f.Subnet = b.name("public"), b.name("k8s-net"), b.name("k8s-subnet")
	ext, err := networks.Create(ctx, a.Network, external.CreateOptsExt{
		CreateOptsBuilder: networks.CreateOpts{Name: f.ExternalNetwork, ProjectID: f.ProjectID},
		External:          gophercloud.Enabled,
	}).Extract()
	b.fatal("create external network", err)
	f.ExternalNetworkID = ext.ID
	b.cleanup("external network", func() error { return networks.Delete(context.Background(), a.Network, ext.ID).ExtractErr() })
	// The external subnet is a /24 of the range hack/openstack-up.sh made
	// this machine's (as loopback is), without DHCP: a floating IP from it
	// is an address of this machine, where a test's API server can listen
	// as a cluster's endpoint does on its floating IP, and which pods on
	// real nodes reach (testenv routes the range through the host).
	_, err = subnets.Create(ctx, a.Network, subnets.CreateOpts{NetworkID: ext.ID, Name: b.name("public-subnet"), CIDR: externalCIDR(b.t),
		IPVersion: 4, ProjectID: f.ProjectID, EnableDHCP: gophercloud.Disabled}).Extract()
	b.fatal("create external subnet", err)
	net, err := networks.Create(ctx, a.Network, networks.CreateOpts{Name: f.Network, ProjectID: f.ProjectID}).Extract()
	b.fatal("create network", err)
	f.NetworkID = net.ID
	b.cleanup("network", func() error { return networks.Delete(context.Background(), a.Network, net.ID).ExtractErr() })
	sub, err := subnets.Create(ctx, a.Network, subnets.CreateOpts{NetworkID: net.ID, Name: f.Subnet, CIDR: "10.6.0.0/24", IPVersion: 4, ProjectID: f.ProjectID}).Extract()
	b.fatal("create subnet", err)
	r, err := routers.Create(ctx, a.Network, routers.CreateOpts{Name: b.name("k8s-router"), ProjectID: f.ProjectID, GatewayInfo: &routers.GatewayInfo{NetworkID: ext.ID}}).Extract()
	b.fatal("create router", err)
	b.cleanup("router", func() error { return routers.Delete(context.Background(), a.Network, r.ID).ExtractErr() })
	_, err = routers.AddInterface(ctx, a.Network, r.ID, routers.AddInterfaceOpts{SubnetID: sub.ID}).Extract()
	b.fatal("attach router to subnet", err)
	b.cleanup("router interface", func() error {
		_, err := routers.RemoveInterface(context.Background(), a.Network, r.ID, routers.RemoveInterfaceOpts{SubnetID: sub.ID}).Extract()
		return err
	})
}

// flavorAndImage creates a flavor and a small image.
func (b *builder) flavorAndImage(ctx context.Context) {
	a, f := b.a, b.f
	f.Flavor, f.Image = b.name("ferry.small"), b.name("ubuntu-2204-kube")
	fl, err := flavors.Create(ctx, a.Compute, flavors.CreateOpts{Name: f.Flavor, VCPUs: 1, RAM: 512, Disk: gophercloud.IntToPointer(1)}).Extract()
	b.fatal("create flavor", err)
	f.FlavorID = fl.ID
	b.cleanup("flavor", func() error { return flavors.Delete(context.Background(), a.Compute, fl.ID).ExtractErr() })
	public := images.ImageVisibilityPublic
	img, err := images.Create(ctx, a.Image, images.CreateOpts{Name: f.Image, Visibility: &public, ContainerFormat: "bare", DiskFormat: "raw"}).Extract()
	b.fatal("create image", err)
	f.ImageID = img.ID
	b.cleanup("image", func() error { return images.Delete(context.Background(), a.Image, img.ID).ExtractErr() })
	b.fatal("upload image", imagedata.Upload(ctx, a.Image, img.ID, bytes.NewReader(make([]byte, 1024))).ExtractErr())
}

// servers creates servers named like the nodes of the cluster being
// adopted (<clusterName>-<suffix>-<fixture suffix>), in the project, as its user creates them; one at a time, which
// the services on SQLite take better than a burst.
func (b *builder) servers(ctx context.Context, clusterName string, suffixes []string) {
	a, f := b.a, b.f
	user := f.UserCompute(b.t)
	// Every server and port of the project goes, also those that CAPO
	// made when a test scaled a pool up.
	b.cleanup("servers and ports", func() error { return f.deleteAll(a) })
	for _, s := range suffixes {
		nodeName := clusterName + "-" + s + "-" + f.Suffix
		_, err := CreateActive(ctx, b.t, user, func(ctx context.Context) (string, error) {
			srv, err := servers.Create(ctx, user, servers.CreateOpts{
				Name: nodeName, FlavorRef: f.FlavorID, ImageRef: f.ImageID, Networks: []servers.Network{{UUID: f.NetworkID}},
			}, nil).Extract()
			if err != nil {
				return "", err
			}
			f.Servers[nodeName] = srv.ID // the last attempt's; cleaned up even if the test stops while it builds
			return srv.ID, nil
		})
		b.fatal("server "+nodeName, err)
	}
}

// addresses records the servers' fixed IPs, which their nodes report as
// InternalIP.
func (b *builder) addresses(ctx context.Context) {
	f := b.f
	ports, err := f.ProjectPorts(ctx)
	b.fatal("list the servers' ports", err)
	f.Addresses = map[string]string{}
	for name, id := range f.Servers {
		for _, p := range ports {
			if p.DeviceID == id && len(p.FixedIPs) > 0 {
				f.Addresses[name] = p.FixedIPs[0].IPAddress
			}
		}
	}
}

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

// externalCIDR picks a /24 of testenv.HostServices (10.128.0.0/10) away
// from 10.128.0.x, where the cloud's APIs listen.
func externalCIDR(t testenv.T) string {
	b := make([]byte, 2)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("ostest: %v", err)
	}
	return fmt.Sprintf("10.%d.%d.0/24", 129+int(b[0])%63, b[1])
}

func randomHex(t testenv.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
