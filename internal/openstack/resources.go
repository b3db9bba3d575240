package openstack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/keypairs"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/limits"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	"github.com/gophercloud/gophercloud/v2/pagination"

	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/step"
)

// Kind is a kind of OpenStack resource a plan names.
type Kind string

const (
	KindFlavor          Kind = "flavor"
	KindImage           Kind = "image"
	KindNetwork         Kind = "network"
	KindExternalNetwork Kind = "externalNetwork"
	KindSubnet          Kind = "subnet"
	KindServer          Kind = "server"
)

// NotFoundError says that no resource of a kind has a name.
type NotFoundError struct {
	Kind Kind
	Name string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("no %s named %q", e.Kind, e.Name)
}

// AmbiguousError says that several resources of a kind share a name, so a
// plan must name one by ID.
type AmbiguousError struct {
	Kind Kind
	Name string
	IDs  []string
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("%d %ss are named %q (IDs %s); name one by id", len(e.IDs), e.Kind, e.Name, strings.Join(e.IDs, ", "))
}

// Resolve returns the ID of the resource of kind named name. No match and
// several matches are terminal errors (NotFoundError, AmbiguousError): the
// plan has to change.
func (c *Client) Resolve(ctx context.Context, kind Kind, name string) (_ string, err error) {
	defer scrubErr(&err)
	ids, err := c.idsByName(ctx, kind, name)
	if err != nil {
		return "", fmt.Errorf("look up %s %q in cloud %q: %w", kind, name, c.cloud, err)
	}
	switch len(ids) {
	case 0:
		return "", failure.Terminal(&NotFoundError{Kind: kind, Name: name})
	case 1:
		return ids[0], nil
	}
	sort.Strings(ids)
	return "", failure.Terminal(&AmbiguousError{Kind: kind, Name: name, IDs: ids})
}

// idsByName lists the IDs of resources whose name is exactly name. Nova
// filters names by regular expression, so the name is quoted and anchored.
func (c *Client) idsByName(ctx context.Context, kind Kind, name string) ([]string, error) {
	switch kind {
	case KindFlavor:
		return c.flavorIDs(ctx, name)
	case KindImage:
		return c.imageIDs(ctx, name)
	case KindNetwork, KindExternalNetwork:
		return c.networkIDs(ctx, name, kind == KindExternalNetwork)
	case KindSubnet:
		return c.subnetIDs(ctx, name)
	case KindServer:
		return c.serverIDs(ctx, name)
	default:
		return nil, failure.Terminal(fmt.Errorf("unknown resource kind %q", kind))
	}
}

// flavorIDs lists the IDs of the flavors named name, private ones too.
func (c *Client) flavorIDs(ctx context.Context, name string) ([]string, error) {
	// Flavors cannot be filtered by name; there are few of them.
	pager := flavors.ListDetail(c.compute, flavors.ListOpts{AccessType: flavors.AllAccess})
	return listIDs(ctx, pager, flavors.ExtractFlavors, func(f flavors.Flavor) (string, bool) { return f.ID, f.Name == name })
}

// imageIDs lists the IDs of the images named name.
func (c *Client) imageIDs(ctx context.Context, name string) ([]string, error) {
	pager := images.List(c.image, images.ListOpts{Name: name})
	return listIDs(ctx, pager, images.ExtractImages, func(i images.Image) (string, bool) { return i.ID, true })
}

// networkRef is what networkIDs needs of a network: networks.Network
// decodes itself, which would hide router:external if it were embedded
// in a struct that adds it.
type networkRef struct {
	ID       string `json:"id"`
	External bool   `json:"router:external"`
}

// networkIDs lists the IDs of the networks named name; external ones only
// when external is set.
func (c *Client) networkIDs(ctx context.Context, name string, external bool) ([]string, error) {
	pager := networks.List(c.network, networks.ListOpts{Name: name})
	extract := func(p pagination.Page) ([]networkRef, error) {
		var all []networkRef
		err := networks.ExtractNetworksInto(p, &all)
		return all, err
	}
	return listIDs(ctx, pager, extract, func(n networkRef) (string, bool) { return n.ID, !external || n.External })
}

// subnetIDs lists the IDs of the subnets named name.
func (c *Client) subnetIDs(ctx context.Context, name string) ([]string, error) {
	pager := subnets.List(c.network, subnets.ListOpts{Name: name})
	return listIDs(ctx, pager, subnets.ExtractSubnets, func(s subnets.Subnet) (string, bool) { return s.ID, true })
}

// serverIDs lists the IDs of the servers named name, quoted and anchored
// for Nova's regular expression and then compared exactly.
func (c *Client) serverIDs(ctx context.Context, name string) ([]string, error) {
	pager := servers.List(c.compute, servers.ListOpts{Name: "^" + regexp.QuoteMeta(name) + "$"})
	return listIDs(ctx, pager, servers.ExtractServers, func(s servers.Server) (string, bool) { return s.ID, s.Name == name })
}

// listIDs reads every page of a listing and returns the IDs of the items
// that id accepts: the lookups by name differ only in their listing, how
// its pages decode, and which items match.
func listIDs[T any](ctx context.Context, pager pagination.Pager, extract func(pagination.Page) ([]T, error), id func(T) (string, bool)) ([]string, error) {
	pages, err := pager.AllPages(ctx)
	if err != nil {
		return nil, err
	}
	all, err := extract(pages)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, x := range all {
		if v, ok := id(x); ok {
			ids = append(ids, v)
		}
	}
	return ids, nil
}

// ProviderID returns the provider ID of the server named like a node,
// openstack:///<server-id>, for a Machine that adopts the node.
func (c *Client) ProviderID(ctx context.Context, nodeName string) (_ string, err error) {
	defer scrubErr(&err)
	id, err := c.Resolve(ctx, KindServer, nodeName)
	if err != nil {
		return "", err
	}
	return step.ProviderIDPrefix + id, nil
}

// serverPage is how many servers a page of Servers' listing asks for:
// a project of thousands is not held in memory as one JSON document.
var serverPage = 500

// Servers returns the IDs of the project's servers by name, for the
// planner's snapshot. A name that two servers share is left out: it cannot
// identify a node's server.
func (c *Client) Servers(ctx context.Context) (_ map[string]string, err error) {
	defer scrubErr(&err)
	// The plain listing (not /servers/detail) has what is needed, names
	// and IDs, at a fraction of the bytes to read and decode; pages of
	// serverPage are decoded one at a time.
	byName := map[string]string{}
	dup := map[string]bool{}
	err = servers.ListSimple(c.compute, servers.ListOpts{Limit: serverPage}).EachPage(ctx, func(_ context.Context, page pagination.Page) (bool, error) {
		var list []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		}
		if err := servers.ExtractServersInto(page, &list); err != nil {
			return false, err
		}
		for _, s := range list {
			if _, seen := byName[s.Name]; seen {
				dup[s.Name] = true
			}
			byName[s.Name] = s.ID
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list servers in cloud %q: %w", c.cloud, err)
	}
	for name := range dup {
		delete(byName, name)
	}
	return byName, nil
}

// ErrKeypairMismatch is wrapped when a keypair of the name exists with
// another public key: ferry neither replaces nor uses it.
var ErrKeypairMismatch = errors.New("keypair exists with a different public key")

// EnsureKeypair makes sure the keypair name exists. When it is missing it
// is created with publicKey, and created is true: the caller records that
// ferry made it, so that clean-up may remove it. A keypair that exists with
// another key is a terminal error; with publicKey empty any key is fine.
func (c *Client) EnsureKeypair(ctx context.Context, name, publicKey string) (created bool, err error) {
	defer scrubErr(&err)
	kp, err := keypairs.Get(ctx, c.compute, name, nil).Extract()
	switch {
	case err == nil:
		if publicKey != "" && strings.Join(firstTwo(kp.PublicKey), " ") != strings.Join(firstTwo(publicKey), " ") {
			return false, failure.Terminal(fmt.Errorf("keypair %q in cloud %q: %w", name, c.cloud, ErrKeypairMismatch))
		}
		return false, nil
	case !gophercloud.ResponseCodeIs(err, http.StatusNotFound):
		return false, fmt.Errorf("get keypair %q in cloud %q: %w", name, c.cloud, err)
	case publicKey == "":
		return false, failure.Terminal(fmt.Errorf("keypair %q does not exist in cloud %q and the plan gives no public key to create it with", name, c.cloud))
	}
	_, err = keypairs.Create(ctx, c.compute, keypairs.CreateOpts{Name: name, PublicKey: publicKey}).Extract()
	if gophercloud.ResponseCodeIs(err, http.StatusConflict) {
		// Created concurrently: check it is the same key.
		return c.EnsureKeypair(ctx, name, publicKey)
	}
	if err != nil {
		return false, fmt.Errorf("create keypair %q in cloud %q: %w", name, c.cloud, err)
	}
	return true, nil
}

// DeleteKeypair deletes keypair name; deleted is false when it was gone
// already.
func (c *Client) DeleteKeypair(ctx context.Context, name string) (deleted bool, err error) {
	defer scrubErr(&err)
	err = retryServerErrors(ctx, func() error { return keypairs.Delete(ctx, c.compute, name, nil).ExtractErr() })
	switch {
	case gophercloud.ResponseCodeIs(err, http.StatusNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("delete keypair %q in cloud %q: %w", name, c.cloud, err)
	}
	return true, nil
}

// firstTwo returns a public key's type and base64 body, without the comment.
func firstTwo(key string) []string {
	f := strings.Fields(key)
	if len(f) > 2 {
		f = f[:2]
	}
	return f
}

// Keypairs returns the names of the project user's keypairs.
func (c *Client) Keypairs(ctx context.Context) (_ []string, err error) {
	defer scrubErr(&err)
	pages, err := keypairs.List(c.compute, nil).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list keypairs in cloud %q: %w", c.cloud, err)
	}
	all, err := keypairs.ExtractKeyPairs(pages)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(all))
	for _, k := range all {
		names = append(names, k.Name)
	}
	sort.Strings(names)
	return names, nil
}

// Need is what new machines take from the compute quota.
type Need struct {
	Instances, Cores, RAMMiB int
}

// Shortfall compares need with what the project's compute quota has left
// and says what is missing, or "" when the quota covers it. A quota of -1
// is unlimited.
func (c *Client) Shortfall(ctx context.Context, need Need) (_ string, err error) {
	defer scrubErr(&err)
	l, err := limits.Get(ctx, c.compute, nil).Extract()
	if err != nil {
		return "", fmt.Errorf("get compute limits in cloud %q: %w", c.cloud, err)
	}
	a := l.Absolute
	var short []string
	check := func(what string, want, max, used int) {
		if max >= 0 && used+want > max {
			short = append(short, fmt.Sprintf("%s: need %d, %d of %d left", what, want, max-used, max))
		}
	}
	check("instances", need.Instances, a.MaxTotalInstances, a.TotalInstancesUsed)
	check("cores", need.Cores, a.MaxTotalCores, a.TotalCoresUsed)
	check("RAM MiB", need.RAMMiB, a.MaxTotalRAMSize, a.TotalRAMUsed)
	return strings.Join(short, "; "), nil
}

// FlavorSize returns a flavor's vCPUs and RAM, to add up a Need.
func (c *Client) FlavorSize(ctx context.Context, name string) (vcpus, ramMiB int, err error) {
	defer scrubErr(&err)
	id, err := c.Resolve(ctx, KindFlavor, name)
	if err != nil {
		return 0, 0, err
	}
	f, err := flavors.Get(ctx, c.compute, id).Extract()
	if err != nil {
		return 0, 0, fmt.Errorf("get flavor %q in cloud %q: %w", name, c.cloud, err)
	}
	return f.VCPUs, f.RAM, nil
}
