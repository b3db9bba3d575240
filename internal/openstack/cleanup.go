package openstack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/keypairs"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/attributestags"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"
)

// Resource is an OpenStack resource ferry made, by kind, ID and name.
type Resource struct {
	Kind string `json:"kind"`
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
}

// Resource kinds clean-up knows.
const (
	ResourceServer        = "server"
	ResourceSecurityGroup = "securityGroup"
	ResourceKeypair       = "keypair"
)

func (r Resource) String() string { return r.Kind + "/" + r.Name }

// PlanTag is the tag ferry puts on what it creates for a plan. Tags are at
// most 60 characters, so a long plan name is replaced by its hash.
func PlanTag(plan string) string {
	tag := "ferry-plan=" + plan
	if len(tag) <= 60 {
		return tag
	}
	sum := sha256.Sum256([]byte(plan))
	return "ferry-plan=" + hex.EncodeToString(sum[:])[:40]
}

// ServerSpec is a server ferry creates for a plan (a VPN gateway, say).
type ServerSpec struct {
	Name, FlavorID, ImageID, NetworkID, KeyName string
	// Plan is the plan the server is tagged for.
	Plan string
}

// CreateServer creates a server tagged for its plan and returns its ID. It
// does not wait for the server to become ACTIVE.
func (c *Client) CreateServer(ctx context.Context, spec ServerSpec) (_ string, err error) {
	defer scrubErr(&err)
	opts := servers.CreateOpts{
		Name:      spec.Name,
		FlavorRef: spec.FlavorID,
		ImageRef:  spec.ImageID,
		Networks:  []servers.Network{{UUID: spec.NetworkID}},
		Tags:      []string{PlanTag(spec.Plan)},
	}
	var create servers.CreateOptsBuilder = opts
	if spec.KeyName != "" {
		create = keypairs.CreateOptsExt{CreateOptsBuilder: opts, KeyName: spec.KeyName}
	}
	s, err := servers.Create(ctx, c.compute, create, nil).Extract()
	if err != nil {
		return "", fmt.Errorf("create server %q in cloud %q: %w", spec.Name, c.cloud, err)
	}
	return s.ID, nil
}

// CreateSecurityGroup creates a security group tagged for its plan.
func (c *Client) CreateSecurityGroup(ctx context.Context, name, plan string) (_ string, err error) {
	defer scrubErr(&err)
	g, err := groups.Create(ctx, c.network, groups.CreateOpts{Name: name, Description: "created by ferry for plan " + plan}).Extract()
	if err != nil {
		return "", fmt.Errorf("create security group %q in cloud %q: %w", name, c.cloud, err)
	}
	if err := attributestags.Add(ctx, c.network, "security-groups", g.ID, PlanTag(plan)).ExtractErr(); err != nil {
		return g.ID, fmt.Errorf("tag security group %q in cloud %q: %w", name, c.cloud, err)
	}
	return g.ID, nil
}

// Tagged lists the resources tagged for plan: servers and security groups.
func (c *Client) Tagged(ctx context.Context, plan string) (_ []Resource, err error) {
	defer scrubErr(&err)
	tag := PlanTag(plan)
	var out []Resource
	pages, err := servers.List(c.compute, servers.ListOpts{Tags: tag}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list servers tagged %s in cloud %q: %w", tag, c.cloud, err)
	}
	srvs, err := servers.ExtractServers(pages)
	if err != nil {
		return nil, err
	}
	for _, s := range srvs {
		out = append(out, Resource{Kind: ResourceServer, ID: s.ID, Name: s.Name})
	}
	pages, err = groups.List(c.network, groups.ListOpts{Tags: tag}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list security groups tagged %s in cloud %q: %w", tag, c.cloud, err)
	}
	sgs, err := groups.ExtractGroups(pages)
	if err != nil {
		return nil, err
	}
	for _, g := range sgs {
		out = append(out, Resource{Kind: ResourceSecurityGroup, ID: g.ID, Name: g.Name})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// Cleanup deletes what ferry created for plan: the resources tagged for
// it, and the recorded ones (keypairs, which cannot be tagged). Nothing
// else is touched, whatever its name. It returns what it deleted; a
// resource already gone counts as deleted. Errors are joined, so one
// failure does not stop the rest.
func (c *Client) Cleanup(ctx context.Context, plan string, recorded []Resource) (_ []Resource, err error) {
	defer scrubErr(&err)
	tagged, err := c.Tagged(ctx, plan)
	if err != nil {
		return nil, err
	}
	var deleted []Resource
	var errs []error
	for _, r := range append(tagged, recorded...) {
		err := retryServerErrors(ctx, func() error { return c.delete(ctx, r) })
		if err != nil && !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			errs = append(errs, fmt.Errorf("delete %s in cloud %q: %w", r, c.cloud, err))
			continue
		}
		if r.Kind == ResourceServer {
			// Nova deletes in the background; wait, so that a second
			// clean-up finds nothing and the server's ports are free.
			if err := c.waitGone(ctx, r.ID); err != nil {
				errs = append(errs, fmt.Errorf("wait for %s to be deleted in cloud %q: %w", r, c.cloud, err))
				continue
			}
		}
		deleted = append(deleted, r)
	}
	return deleted, errors.Join(errs...)
}

// delete deletes one resource.
func (c *Client) delete(ctx context.Context, r Resource) error {
	switch r.Kind {
	case ResourceServer:
		return servers.Delete(ctx, c.compute, r.ID).ExtractErr()
	case ResourceSecurityGroup:
		return groups.Delete(ctx, c.network, r.ID).ExtractErr()
	case ResourceKeypair:
		return keypairs.Delete(ctx, c.compute, r.Name, nil).ExtractErr()
	}
	return fmt.Errorf("unknown kind %q", r.Kind)
}

// retryServerErrors runs fn again, up to 4 times 1, 2 and 4 seconds apart,
// while it fails with a 5xx or a 409: OpenStack services answer those
// under concurrent writes (a busy database, a port still bound), and they
// pass. Other errors, and success, return at once.
func retryServerErrors(ctx context.Context, fn func() error) error {
	wait := time.Second
	for attempt := 1; ; attempt++ {
		err := fn()
		var code gophercloud.ErrUnexpectedResponseCode
		transient := errors.As(err, &code) && (code.Actual >= 500 || code.Actual == http.StatusConflict)
		if !transient || attempt == 4 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// waitGone polls a deleted server until Nova no longer knows it, or ctx ends.
func (c *Client) waitGone(ctx context.Context, id string) error {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := servers.Get(ctx, c.compute, id).Extract()
		if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
