package ostest

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"

	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// ExtraFlavor creates another flavor for the fixture, named
// <base>-<suffix>, for a test that changes a server's flavor; it is
// removed when the test ends. It returns the flavor's name and ID.
func (f *Fixture) ExtraFlavor(t testenv.T, base string, ramMB int) (name, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name = base + "-" + f.Suffix
	fl, err := flavors.Create(ctx, f.admin.Compute, flavors.CreateOpts{Name: name, VCPUs: 1, RAM: ramMB, Disk: gophercloud.IntToPointer(1)}).Extract()
	if err != nil {
		t.Fatalf("ostest: create flavor %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := flavors.Delete(context.Background(), f.admin.Compute, fl.ID).ExtractErr(); err != nil {
			t.Logf("ostest: delete flavor %s: %v", name, err)
		}
	})
	return name, fl.ID
}

// NovaServer is a server as Nova reports it to the admin.
type NovaServer struct {
	ID, Name, Status, FlavorID, ImageID string
}

// Server reads the server with id as the admin; nil when Nova has none.
func (f *Fixture) Server(ctx context.Context, id string) (*NovaServer, error) {
	d, err := serverDetails(ctx, f.admin.Compute, id)
	if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ostest: %w", err)
	}
	return &NovaServer{ID: id, Name: d.Name, Status: d.Status, FlavorID: d.FlavorID, ImageID: d.ImageID}, nil
}

// ServersNamed lists the project's servers with the name, as the admin.
func (f *Fixture) ServersNamed(ctx context.Context, name string) ([]string, error) {
	all, err := f.ProjectServers(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, s := range all {
		if s.Name == name {
			ids = append(ids, s.ID)
		}
	}
	return ids, nil
}
