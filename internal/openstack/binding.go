package openstack

import (
	"context"
	"fmt"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"

	"github.com/ferry-dev/ferry/internal/failure"
)

// ServerBinding is what CAPO records of a server it built, read from Nova
// and Neutron for a server it is to adopt: the image and flavor it runs
// and its ports, in Neutron's order.
type ServerBinding struct {
	ID, Name          string
	ImageID, FlavorID string
	Status            string
	Ports             []ServerPort
}

// ServerPort is one port of a server.
type ServerPort struct {
	ID, Name, NetworkID string
}

// ServerBinding reads server id and its ports. A server that does not
// exist is a terminal error: the node it runs cannot be adopted.
func (c *Client) ServerBinding(ctx context.Context, id string) (_ *ServerBinding, err error) {
	defer scrubErr(&err)
	var srv struct {
		ID     string         `json:"id"`
		Name   string         `json:"name"`
		Status string         `json:"status"`
		Image  map[string]any `json:"image"`
		Flavor map[string]any `json:"flavor"`
	}
	err = servers.Get(ctx, c.compute, id).ExtractInto(&srv)
	switch {
	case gophercloud.ResponseCodeIs(err, 404):
		return nil, failure.Terminal(fmt.Errorf("server %s not found in cloud %q", id, c.cloud))
	case err != nil:
		return nil, fmt.Errorf("get server %s in cloud %q: %w", id, c.cloud, err)
	}
	if srv.ID != id {
		return nil, fmt.Errorf("get server %s in cloud %q: Nova answered with server %q", id, c.cloud, srv.ID)
	}
	b := &ServerBinding{ID: srv.ID, Name: srv.Name, Status: srv.Status}
	// A server booted from a volume has no image ("image": "").
	b.ImageID, _ = srv.Image["id"].(string)
	b.FlavorID, _ = srv.Flavor["id"].(string)
	if name, _ := srv.Flavor["original_name"].(string); b.FlavorID == "" && name != "" {
		// Nova 2.47 and later embed the flavor by name, not ID.
		if b.FlavorID, err = c.Resolve(ctx, KindFlavor, name); err != nil {
			return nil, fmt.Errorf("flavor of server %s: %w", id, err)
		}
	}
	pages, err := ports.List(c.network, ports.ListOpts{DeviceID: id}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the ports of server %s in cloud %q: %w", id, c.cloud, err)
	}
	list, err := ports.ExtractPorts(pages)
	if err != nil {
		return nil, fmt.Errorf("list the ports of server %s in cloud %q: %w", id, c.cloud, err)
	}
	for _, p := range list {
		b.Ports = append(b.Ports, ServerPort{ID: p.ID, Name: p.Name, NetworkID: p.NetworkID})
	}
	return b, nil
}
