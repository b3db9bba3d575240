package kube

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestCoreMapper: the kinds ferry reads in workload clusters map without
// discovery, with their real resources and scopes; other groups are left
// to discovery.
func TestCoreMapper(t *testing.T) {
	m := coreMapper()
	for _, tc := range []struct {
		gk       schema.GroupKind
		resource string
		root     bool
	}{
		{schema.GroupKind{Kind: "Node"}, "nodes", true},
		{schema.GroupKind{Kind: "Namespace"}, "namespaces", true},
		{schema.GroupKind{Kind: "Pod"}, "pods", false},
		{schema.GroupKind{Kind: "ConfigMap"}, "configmaps", false},
		{schema.GroupKind{Kind: "Service"}, "services", false},
		{schema.GroupKind{Kind: "Endpoints"}, "endpoints", false},
		{schema.GroupKind{Group: "apps", Kind: "DaemonSet"}, "daemonsets", false},
		{schema.GroupKind{Group: "apps", Kind: "Deployment"}, "deployments", false},
	} {
		mapping, err := m.RESTMapping(tc.gk, "v1")
		if err != nil {
			t.Errorf("%v: %v", tc.gk, err)
			continue
		}
		if mapping.Resource.Resource != tc.resource || (mapping.Scope.Name() == meta.RESTScopeNameRoot) != tc.root {
			t.Errorf("%v maps to %s, scope %s", tc.gk, mapping.Resource, mapping.Scope.Name())
		}
	}
	if _, err := m.RESTMapping(schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}, "v1"); !meta.IsNoMatchError(err) {
		t.Errorf("ClusterRole: %v; want no match (discovery decides its scope)", err)
	}
}
