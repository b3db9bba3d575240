package observer

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/openstack"
)

// CloudAPI is what observing the cloud needs of an OpenStack client.
type CloudAPI interface {
	Resolve(ctx context.Context, kind openstack.Kind, name string) (string, error)
	Servers(ctx context.Context) (map[string]string, error)
	Keypairs(ctx context.Context) ([]string, error)
	FlavorSize(ctx context.Context, name string) (vcpus, ramMiB int, err error)
	Shortfall(ctx context.Context, need openstack.Need) (string, error)
	Tagged(ctx context.Context, plan string) ([]openstack.Resource, error)
	HasLoadBalancer() bool
}

var _ CloudAPI = (*openstack.Client)(nil)

// OpenStack observes a plan's cloud with the credentials of its identity
// Secret, or of the Secret it is copied from while it is not filled yet.
//
// What it read is kept for MaxAge per plan: the cloud changes slowly, its
// APIs are expensive, and a reconciler cycles far more often than that. An
// openstack step's result makes the loop call Forget, so the next cycle sees
// the step's effect at once.
type OpenStack struct {
	// Client reads the Secrets in the management cluster.
	Client client.Client
	// Connect opens the cloud; nil uses openstack.Connect.
	Connect func(ctx context.Context, creds openstack.Credentials) (CloudAPI, error)
	// MaxAge is how long an observation is reused. Default 1 minute; a
	// negative value disables the cache.
	MaxAge time.Duration
	// Now is the clock; nil uses time.Now.
	Now func() time.Time

	mu          sync.Mutex
	cache       map[string]cachedCloud
	projects    map[string]*cloudProject // by credentials
	planProject map[string]string        // plan -> its project's key
}

// cachedCloud is a plan's own part of an observation: its servers and
// keypairs are its project's latest, so that a thousand plans of one
// project do not each keep their own generation of the project's lists.
type cachedCloud struct {
	cloud   *observed.Cloud
	project *cloudProject
	at      time.Time
}

// Forget drops plan's cached observation, and its project's keypairs and
// names that did not resolve: an openstack step of one plan may have
// created a keypair, or found an image that was missing, for all the
// plans that share the project. The project's servers are kept until
// MaxAge: no step of ferry's creates or deletes a server (CAPO does), and
// listing a fleet's servers after each step of each plan would cost more
// than all the rest of an observation.
func (o *OpenStack) Forget(plan string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.cache, plan)
	if pr := o.projects[o.planProject[plan]]; pr != nil {
		pr.mu.Lock()
		pr.keypairsAt = time.Time{}
		for key, r := range pr.resolved {
			if r.Error != "" {
				delete(pr.resolved, key)
			}
		}
		pr.mu.Unlock()
	}
}

func (o *OpenStack) maxAge() time.Duration {
	if o.MaxAge == 0 {
		return time.Minute
	}
	return o.MaxAge
}

func (o *OpenStack) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

var _ CloudObserver = (*OpenStack)(nil)

// ObserveCloud resolves the names the plan gives, and reads the servers by
// name, the keypairs, the quota left for the new machines and what ferry
// tagged for the plan. A name that does not resolve is recorded with why;
// an error means the cloud could not be asked.
func (o *OpenStack) ObserveCloud(ctx context.Context, p *v1alpha1.MigrationPlan) (*observed.Cloud, error) {
	maxAge := o.maxAge()
	o.mu.Lock()
	c, ok := o.cache[p.Metadata.Name]
	o.mu.Unlock()
	if !ok || maxAge <= 0 || o.now().Sub(c.at) >= maxAge {
		cloud, pr, err := o.observeCloud(ctx, p)
		if err != nil {
			return nil, err
		}
		c = cachedCloud{cloud: cloud, project: pr, at: o.now()}
		o.mu.Lock()
		if o.cache == nil {
			o.cache = map[string]cachedCloud{}
		}
		o.cache[p.Metadata.Name] = c
		o.mu.Unlock()
	}
	out := *c.cloud
	c.project.mu.Lock()
	out.Servers, out.Keypairs = c.project.servers, c.project.keypairs
	c.project.mu.Unlock()
	return &out, nil
}

// observeCloud observes what is the plan's own; the servers and keypairs
// are its project's.
func (o *OpenStack) observeCloud(ctx context.Context, p *v1alpha1.MigrationPlan) (*observed.Cloud, *cloudProject, error) {
	creds, err := openstack.CloudCredentials(ctx, o.Client, p)
	if err != nil {
		return nil, nil, err
	}
	pr, err := o.project(ctx, creds, p.Metadata.Name)
	if err != nil {
		return nil, nil, err
	}
	cloud, api, err := pr.resolve(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	cloud.LoadBalancer = api.HasLoadBalancer()
	if cloud.QuotaShortfall, err = shortfall(ctx, api, p, cloud.Resolved); err != nil {
		return nil, nil, err
	}
	tagged, err := api.Tagged(ctx, p.Metadata.Name)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range tagged {
		cloud.Tagged = append(cloud.Tagged, r.String())
	}
	return cloud, pr, nil
}

// resolve starts a plan's observation with the plan's names, resolved
// once per project.
func (pr *cloudProject) resolve(ctx context.Context, p *v1alpha1.MigrationPlan) (*observed.Cloud, CloudAPI, error) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	cloud := &observed.Cloud{Resolved: map[string]observed.Resolution{}}
	for _, n := range p.CloudNames() {
		if r, ok := pr.resolved[n.Key()]; ok {
			cloud.Resolved[n.Key()] = r
			continue
		}
		id, err := pr.api.Resolve(ctx, openstack.Kind(n.Kind), n.Name)
		var nf *openstack.NotFoundError
		var amb *openstack.AmbiguousError
		switch {
		case err == nil:
			cloud.Resolved[n.Key()] = observed.Resolution{ID: id}
		case errors.As(err, &nf), errors.As(err, &amb):
			cloud.Resolved[n.Key()] = observed.Resolution{Error: err.Error()}
		default:
			return nil, nil, err
		}
		pr.resolved[n.Key()] = cloud.Resolved[n.Key()]
	}
	return cloud, pr.api, nil
}

// cloudProject is what the plans sharing one set of credentials (one
// project) share of an observation: the connection, the servers, the
// keypairs and the names resolved. A fleet in one project is read once per
// MaxAge, not once per plan.
type cloudProject struct {
	mu  sync.Mutex
	api CloudAPI
	// at is when the servers were listed and the resolved names cleared;
	// keypairsAt, when the keypairs were listed.
	at, keypairsAt time.Time
	servers        map[string]string
	keypairs       []string
	resolved       map[string]observed.Resolution
}

// project returns the fresh shared observation of the credentials' project
// for plan, reading it again when older than MaxAge or forgotten.
func (o *OpenStack) project(ctx context.Context, creds openstack.Credentials, plan string) (*cloudProject, error) {
	h := sha256.New()
	for _, b := range [][]byte{[]byte(creds.Cloud), creds.CloudsYAML, creds.CACert} {
		h.Write(b)
		h.Write([]byte{0})
	}
	key := string(h.Sum(nil))
	o.mu.Lock()
	if o.projects == nil {
		o.projects, o.planProject = map[string]*cloudProject{}, map[string]string{}
	}
	pr, ok := o.projects[key]
	if !ok {
		pr = &cloudProject{}
		o.projects[key] = pr
	}
	o.planProject[plan] = key
	o.mu.Unlock()

	pr.mu.Lock()
	defer pr.mu.Unlock()
	fresh := func(at time.Time) bool { return !at.IsZero() && o.now().Sub(at) < o.maxAge() }
	if pr.api != nil && fresh(pr.at) && fresh(pr.keypairsAt) {
		return pr, nil
	}
	if pr.api == nil {
		connect := o.Connect
		if connect == nil {
			connect = func(ctx context.Context, c openstack.Credentials) (CloudAPI, error) { return openstack.Connect(ctx, c) }
		}
		api, err := connect(ctx, creds)
		if err != nil {
			return nil, err
		}
		pr.api = api
		pr.at, pr.keypairsAt = time.Time{}, time.Time{}
	}
	if !fresh(pr.at) {
		servers, err := pr.api.Servers(ctx)
		if err != nil {
			pr.api = nil // connect again next time
			return nil, err
		}
		pr.servers, pr.resolved, pr.at = servers, map[string]observed.Resolution{}, o.now()
	}
	if !fresh(pr.keypairsAt) {
		keypairs, err := pr.api.Keypairs(ctx)
		if err != nil {
			pr.api = nil
			return nil, err
		}
		pr.keypairs, pr.keypairsAt = keypairs, o.now()
	}
	return pr, nil
}

// shortfall adds up the new worker machines of the plan (replace creates
// them; adopt's rollout replaces machines one at a time and needs one
// more at most) and asks the quota. Flavors that did not resolve are
// reported elsewhere, so they count for nothing here.
func shortfall(ctx context.Context, api openstack.QuotaAPI, p *v1alpha1.MigrationPlan, resolved map[string]observed.Resolution) (string, error) {
	return openstack.QuotaShortfall(ctx, api, p.NewMachines(), func(flavor string) bool { return resolved["flavor/"+flavor].ID != "" })
}
