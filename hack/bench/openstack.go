package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// cloudStandIn is a STAND-IN for the OpenStack APIs that ferry calls while
// it adopts clusters: Keystone tokens, Nova flavors, servers, keypairs and
// limits, Neutron networks, subnets and security groups, Glance images. It
// answers from memory, with the payloads the APIs document, so that the
// benchmark measures ferry and the Kubernetes API rather than a cloud on
// SQLite. (The tests run against the real services; see hack/openstack-up.sh.)
type cloudStandIn struct {
	srv      *httptest.Server
	requests atomic.Int64

	mu       sync.Mutex
	servers  map[string]string // name -> id
	keypairs map[string]string // name -> public key
}

// Names of the stand-in's resources, which the benchmark's plans use, and
// their IDs (UUIDs, as CAPO's CRDs require of IDs).
const (
	cloudNetworkID  = "11111111-1111-4111-8111-000000000001"
	cloudExternalID = "11111111-1111-4111-8111-000000000002"
	cloudSubnetID   = "11111111-1111-4111-8111-000000000003"
	cloudFlavorID   = "11111111-1111-4111-8111-000000000004"
	cloudImageID    = "11111111-1111-4111-8111-000000000005"

	cloudNetwork  = "k8s-net"
	cloudSubnet   = "k8s-subnet"
	cloudExternal = "public"
	cloudFlavor   = "m1.large"
	cloudImage    = "ubuntu-2204-kube-v1.31"
)

func newCloudStandIn() *cloudStandIn {
	c := &cloudStandIn{servers: map[string]string{}, keypairs: map[string]string{}}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	return c
}

func (c *cloudStandIn) close() { c.srv.Close() }

// cloudsYAML is a clouds.yaml for the stand-in (cloud "openstack").
func (c *cloudStandIn) cloudsYAML() []byte {
	return []byte(fmt.Sprintf("clouds:\n  openstack:\n    auth:\n      auth_url: %s/identity/v3\n      username: bench\n      password: bench-password\n      project_id: bench-project\n      user_domain_id: default\n    region_name: RegionOne\n    identity_api_version: 3\n", c.srv.URL))
}

// addServer records a server (a node being adopted) and returns its ID.
func (c *cloudStandIn) addServer(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := fmt.Sprintf("00000000-0000-4000-8000-%012d", len(c.servers)+1)
	c.servers[name] = id
	return id
}

// serverIDs returns the IDs of the servers whose names start with prefix,
// by name.
func (c *cloudStandIn) serverIDs(prefix string) map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	for name, id := range c.servers {
		if strings.HasPrefix(name, prefix) {
			out[name] = id
		}
	}
	return out
}

// addKeypair records a keypair, as someone who creates it by hand does.
func (c *cloudStandIn) addKeypair(name, publicKey string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keypairs[name] = publicKey
}

func (c *cloudStandIn) serve(w http.ResponseWriter, r *http.Request) {
	c.requests.Add(1)
	w.Header().Set("Content-Type", "application/json")
	p := r.URL.Path
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodPost && p == "/identity/v3/auth/tokens":
		c.token(w)
	case p == "/network/" || p == "/network":
		writeJSON(w, 200, map[string]any{"versions": []any{map[string]any{"id": "v2.0", "status": "CURRENT",
			"links": []any{map[string]any{"rel": "self", "href": c.srv.URL + "/network/v2.0/"}}}}})
	case p == "/image/" || p == "/image":
		writeJSON(w, 200, map[string]any{"versions": []any{map[string]any{"id": "v2.16", "status": "CURRENT",
			"links": []any{map[string]any{"rel": "self", "href": c.srv.URL + "/image/v2/"}}}}})
	case strings.HasPrefix(p, "/compute/v2.1/flavors"):
		flavor := map[string]any{"id": cloudFlavorID, "name": cloudFlavor, "vcpus": 4, "ram": 8192, "disk": 40}
		if strings.HasSuffix(p, "/detail") {
			writeJSON(w, 200, map[string]any{"flavors": []any{flavor}})
		} else {
			writeJSON(w, 200, map[string]any{"flavor": flavor})
		}
	case p == "/compute/v2.1/servers/detail", p == "/compute/v2.1/servers" && r.Method == http.MethodGet:
		type server struct{ id, name string }
		var match []server
		if q.Get("tags") == "" { // nothing carries a ferry-plan tag here
			c.mu.Lock()
			for name, id := range c.servers {
				if n := q.Get("name"); n == "" || strings.Contains(n, name) {
					match = append(match, server{id, name})
				}
			}
			c.mu.Unlock()
		}
		// Pages as Nova's: by ID here, at most limit (and 1,000) each,
		// the next one after the marker's ID, linked while a page is full.
		slices.SortFunc(match, func(a, b server) int { return strings.Compare(a.id, b.id) })
		if m := q.Get("marker"); m != "" {
			match = match[sort.Search(len(match), func(i int) bool { return match[i].id > m }):]
		}
		limit := 1000
		if l, err := strconv.Atoi(q.Get("limit")); err == nil && l > 0 && l < limit {
			limit = l
		}
		body := map[string]any{}
		if len(match) > limit {
			match = match[:limit]
			next := *r.URL
			v := next.Query()
			v.Set("marker", match[limit-1].id)
			next.RawQuery, next.Scheme, next.Host = v.Encode(), "http", r.Host
			body["servers_links"] = []any{map[string]any{"rel": "next", "href": next.String()}}
		}
		list := []any{}
		for _, sv := range match {
			list = append(list, map[string]any{"id": sv.id, "name": sv.name, "status": "ACTIVE", "tags": []string{}})
		}
		body["servers"] = list
		writeJSON(w, 200, body)
	case strings.HasPrefix(p, "/compute/v2.1/servers/") && r.Method == http.MethodGet:
		// One server, as ferry reads it to bind it to an OpenStackServer.
		id := strings.TrimPrefix(p, "/compute/v2.1/servers/")
		name := ""
		c.mu.Lock()
		for n, sid := range c.servers {
			if sid == id {
				name = n
			}
		}
		c.mu.Unlock()
		if name == "" {
			writeJSON(w, 404, map[string]any{"itemNotFound": map[string]any{"code": 404, "message": "Instance " + id + " could not be found."}})
			return
		}
		writeJSON(w, 200, map[string]any{"server": map[string]any{"id": id, "name": name, "status": "ACTIVE",
			"image": map[string]any{"id": cloudImageID}, "flavor": map[string]any{"id": cloudFlavorID}}})
	case p == "/network/v2.0/ports":
		// A server's port: one per server, on the cluster network.
		list := []any{}
		if d := q.Get("device_id"); d != "" {
			list = append(list, map[string]any{"id": "22222222-2222-4222-8222-" + d[len(d)-12:], "name": "", "network_id": cloudNetworkID, "device_id": d, "device_owner": "compute:nova"})
		}
		writeJSON(w, 200, map[string]any{"ports": list})
	case p == "/compute/v2.1/os-keypairs" && r.Method == http.MethodGet:
		var list []any
		c.mu.Lock()
		for name, key := range c.keypairs {
			list = append(list, map[string]any{"keypair": map[string]any{"name": name, "public_key": key}})
		}
		c.mu.Unlock()
		writeJSON(w, 200, map[string]any{"keypairs": nonNil(list)})
	case p == "/compute/v2.1/os-keypairs" && r.Method == http.MethodPost:
		var in struct {
			Keypair struct {
				Name      string `json:"name"`
				PublicKey string `json:"public_key"`
			} `json:"keypair"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		c.mu.Lock()
		_, exists := c.keypairs[in.Keypair.Name]
		if !exists {
			c.keypairs[in.Keypair.Name] = in.Keypair.PublicKey
		}
		c.mu.Unlock()
		if exists {
			writeJSON(w, 409, map[string]any{"conflictingRequest": map[string]any{"code": 409, "message": "Key pair already exists"}})
			return
		}
		writeJSON(w, 200, map[string]any{"keypair": map[string]any{"name": in.Keypair.Name, "public_key": in.Keypair.PublicKey, "user_id": "bench"}})
	case strings.HasPrefix(p, "/compute/v2.1/os-keypairs/"):
		name := strings.TrimPrefix(p, "/compute/v2.1/os-keypairs/")
		c.mu.Lock()
		key, ok := c.keypairs[name]
		c.mu.Unlock()
		if !ok {
			writeJSON(w, 404, map[string]any{"itemNotFound": map[string]any{"code": 404, "message": "Keypair " + name + " not found"}})
			return
		}
		writeJSON(w, 200, map[string]any{"keypair": map[string]any{"name": name, "public_key": key}})
	case p == "/compute/v2.1/limits":
		writeJSON(w, 200, map[string]any{"limits": map[string]any{"absolute": map[string]any{
			"maxTotalCores": 1000000, "totalCoresUsed": 0, "maxTotalRAMSize": 1000000000, "totalRAMUsed": 0,
			"maxTotalInstances": 1000000, "totalInstancesUsed": 0}, "rate": []any{}}})
	case p == "/network/v2.0/networks":
		var list []any
		for _, n := range []struct {
			id, name string
			external bool
		}{{cloudNetworkID, cloudNetwork, false}, {cloudExternalID, cloudExternal, true}} {
			if q.Get("name") == "" || q.Get("name") == n.name {
				list = append(list, map[string]any{"id": n.id, "name": n.name, "router:external": n.external, "status": "ACTIVE"})
			}
		}
		writeJSON(w, 200, map[string]any{"networks": nonNil(list)})
	case p == "/network/v2.0/subnets":
		writeJSON(w, 200, map[string]any{"subnets": []any{map[string]any{"id": cloudSubnetID, "name": cloudSubnet, "network_id": cloudNetworkID, "cidr": "10.6.0.0/24", "ip_version": 4}}})
	case p == "/network/v2.0/security-groups":
		writeJSON(w, 200, map[string]any{"security_groups": []any{}})
	case p == "/image/v2/images":
		writeJSON(w, 200, map[string]any{"images": []any{map[string]any{"id": cloudImageID, "name": cloudImage, "status": "active"}}})
	default:
		writeJSON(w, 404, map[string]any{"error": "the benchmark's OpenStack stand-in does not serve " + r.Method + " " + p})
	}
}

// token answers Keystone's POST /v3/auth/tokens with a catalog pointing at
// the stand-in.
func (c *cloudStandIn) token(w http.ResponseWriter) {
	endpoint := func(typ, path string) map[string]any {
		return map[string]any{"type": typ, "name": typ, "endpoints": []any{
			map[string]any{"interface": "public", "region": "RegionOne", "region_id": "RegionOne", "url": c.srv.URL + path},
		}}
	}
	w.Header().Set("X-Subject-Token", "bench-token")
	writeJSON(w, 201, map[string]any{"token": map[string]any{
		"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"issued_at":  time.Now().UTC().Format(time.RFC3339),
		"methods":    []string{"password"},
		"user":       map[string]any{"id": "bench", "name": "bench", "domain": map[string]any{"id": "default", "name": "Default"}},
		"project":    map[string]any{"id": "bench-project", "name": "bench", "domain": map[string]any{"id": "default", "name": "Default"}},
		"catalog": []any{
			endpoint("identity", "/identity/v3"),
			endpoint("compute", "/compute/v2.1"),
			endpoint("network", "/network"),
			endpoint("image", "/image"),
		},
	}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func nonNil(list []any) []any {
	if list == nil {
		return []any{}
	}
	return list
}
