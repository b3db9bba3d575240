package observer

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/openstack"
)

// projectAPI is one project's cloud for a unit test of the observation
// cache: it counts the listings and serves whatever servers and keypairs
// it has now.
type projectAPI struct {
	mu       sync.Mutex
	servers  map[string]string
	keypairs []string
	missing  map[string]bool // names that do not resolve
	listed   int
}

func (a *projectAPI) Resolve(_ context.Context, kind openstack.Kind, name string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.missing[name] {
		return "", &openstack.NotFoundError{Kind: kind, Name: name}
	}
	return "id", nil
}
func (a *projectAPI) Servers(context.Context) (map[string]string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.listed++
	return maps.Clone(a.servers), nil
}
func (a *projectAPI) Keypairs(context.Context) ([]string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.keypairs), nil
}
func (a *projectAPI) FlavorSize(context.Context, string) (int, int, error) {
	return 1, 512, nil
}
func (a *projectAPI) Shortfall(context.Context, openstack.Need) (string, error) { return "", nil }
func (a *projectAPI) Tagged(context.Context, string) ([]openstack.Resource, error) {
	return nil, nil
}
func (a *projectAPI) HasLoadBalancer() bool { return false }

// TestCloudProjectShared: plans of one project share one listing of its
// servers and keypairs, and the names resolved. After an openstack step
// of one plan every plan sees the project's keypairs anew, including a
// plan whose own observation is still cached, and a name that did not
// resolve is asked again; the servers are listed again only after MaxAge
// (ferry's steps do not change them).
func TestCloudProjectShared(t *testing.T) {
	ctx := context.Background()
	var objs []client.Object
	plans := map[string]*v1alpha1.MigrationPlan{}
	for _, name := range []string{"a", "b"} {
		p := &v1alpha1.MigrationPlan{Metadata: v1alpha1.Metadata{Name: name}, Spec: v1alpha1.Spec{
			Cluster:  v1alpha1.ClusterRef{Name: name, Namespace: "default"},
			Strategy: v1alpha1.StrategyAdopt,
			Target:   v1alpha1.Target{Network: v1alpha1.ResourceRef{Name: "net"}},
		}}
		v1alpha1.Default(p)
		plans[name] = p
		objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: p.Spec.Target.Identity.SecretName},
			Data: map[string][]byte{openstack.CloudsKey: []byte("clouds: {}")}})
	}
	api := &projectAPI{servers: map[string]string{"a-0": "1"}, missing: map[string]bool{"net": true}}
	now := time.Unix(0, 0)
	connects := 0
	o := &OpenStack{
		Client: fake.NewClientBuilder().WithObjects(objs...).Build(),
		Connect: func(context.Context, openstack.Credentials) (CloudAPI, error) {
			connects++
			return api, nil
		},
		MaxAge: time.Hour,
		Now:    func() time.Time { return now },
	}
	observe := func(name string) *observed.Cloud {
		t.Helper()
		cloud, err := o.ObserveCloud(ctx, plans[name])
		if err != nil {
			t.Fatalf("ObserveCloud(%s): %v", name, err)
		}
		return cloud
	}
	if got := observe("a"); got.Servers["a-0"] != "1" || got.Resolved["network/net"].Error == "" {
		t.Fatalf("observation of a = %+v; want server a-0, and network net not found", got)
	}
	if got := observe("b").Servers; got["a-0"] != "1" || api.listed != 1 || connects != 1 {
		t.Fatalf("servers of b = %v after %d listings and %d connections; want a-0 from the one listing", got, api.listed, connects)
	}

	api.mu.Lock()
	api.servers["b-0"] = "2"
	api.keypairs = []string{"key-a"}
	api.missing = nil
	api.mu.Unlock()
	o.Forget("a") // plan a's steps ran: ensure-keypair, and a resolve that found the network
	if got := observe("a"); !slices.Equal(got.Keypairs, []string{"key-a"}) || got.Resolved["network/net"].ID != "id" || api.listed != 1 {
		t.Fatalf("after Forget(a): keypairs %v, network %+v, %d server listings; want key-a, net resolved, and the servers not listed again",
			got.Keypairs, got.Resolved["network/net"], api.listed)
	}
	if got := observe("b"); !slices.Equal(got.Keypairs, []string{"key-a"}) {
		t.Errorf("keypairs of b, cached, = %v; want the project's latest", got.Keypairs)
	}
	now = now.Add(time.Hour)
	if got := observe("b").Servers; got["b-0"] != "2" || api.listed != 2 {
		t.Errorf("servers of b after MaxAge = %v (%d listings); want b-0 from a new listing", got, api.listed)
	}
	if got := observe("a").Servers; got["b-0"] != "2" || api.listed != 2 {
		t.Errorf("servers of a = %v (%d listings); want the project's latest without listing again", got, api.listed)
	}
}
