// Servers on the local Nova, which runs on SQLite: builds retried until
// ACTIVE, deletions waited for, and the project's servers and ports listed
// as its admin sees them.

package ostest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"

	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

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
