package kube

import (
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// coreMapper maps the kinds of the core ("v1") and apps groups without
// discovery: their resources and scopes are the same in every cluster, and
// they are what ferry reads in workload clusters (Nodes, Pods, ConfigMaps,
// Services, DaemonSets). Sharing it spares each workload client a discovery
// of the core group (tens of KB per cluster, and requests at first contact).
var coreMapper = sync.OnceValue(func() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	rootScoped := map[string]bool{"Namespace": true, "Node": true, "PersistentVolume": true, "ComponentStatus": true}
	for gvk := range Scheme().AllKnownTypes() {
		if (gvk.Group != "" || gvk.Version != "v1") && (gvk.Group != "apps" || gvk.Version != "v1") {
			continue
		}
		scope := meta.RESTScopeNamespace
		if rootScoped[gvk.Kind] {
			scope = meta.RESTScopeRoot
		}
		if gvk.Kind == "Endpoints" { // not "endpointses"
			m.AddSpecific(gvk, gvk.GroupVersion().WithResource("endpoints"), gvk.GroupVersion().WithResource("endpoints"), scope)
			continue
		}
		m.Add(gvk, scope)
	}
	return m
})

// workloadMapper answers from coreMapper, and asks the cluster (lazily,
// per group, as controller-runtime's dynamic mapper does) for the rest.
func workloadMapper(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	dynamic, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return firstMatch{coreMapper(), dynamic}, nil
}

// firstMatch asks its first mapper, and its second when the first knows no
// such kind or resource.
type firstMatch [2]meta.RESTMapper

func (f firstMatch) KindFor(r schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	k, err := f[0].KindFor(r)
	if meta.IsNoMatchError(err) {
		return f[1].KindFor(r)
	}
	return k, err
}

func (f firstMatch) KindsFor(r schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	k, err := f[0].KindsFor(r)
	if meta.IsNoMatchError(err) {
		return f[1].KindsFor(r)
	}
	return k, err
}

func (f firstMatch) ResourceFor(r schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	g, err := f[0].ResourceFor(r)
	if meta.IsNoMatchError(err) {
		return f[1].ResourceFor(r)
	}
	return g, err
}

func (f firstMatch) ResourcesFor(r schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	g, err := f[0].ResourcesFor(r)
	if meta.IsNoMatchError(err) {
		return f[1].ResourcesFor(r)
	}
	return g, err
}

func (f firstMatch) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m, err := f[0].RESTMapping(gk, versions...)
	if meta.IsNoMatchError(err) {
		return f[1].RESTMapping(gk, versions...)
	}
	return m, err
}

func (f firstMatch) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	m, err := f[0].RESTMappings(gk, versions...)
	if meta.IsNoMatchError(err) {
		return f[1].RESTMappings(gk, versions...)
	}
	return m, err
}

func (f firstMatch) ResourceSingularizer(resource string) (string, error) {
	s, err := f[0].ResourceSingularizer(resource)
	if err != nil {
		return f[1].ResourceSingularizer(resource)
	}
	return s, nil
}
