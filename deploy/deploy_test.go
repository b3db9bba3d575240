// Package deploy_test checks the manifests under deploy/ against a real API
// server: they are accepted, they wire flags the binary has, and the
// service account's RBAC allows what a migration needs and nothing beyond.
// (cmd/reconciler's run tests go further: they run migrations as this
// service account.)
package deploy_test

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/ferry-dev/ferry/internal/testenv"
)

const serviceAccount = "system:serviceaccount:ferry-system:ferry-reconciler"

func TestManifests(t *testing.T) {
	k := testenv.StartKube(t)
	base := testenv.ApplyKustomization(t, k, ".")
	overlay := testenv.ApplyKustomization(t, k, "overlays/external-nats")

	kinds := map[string]int{}
	for _, o := range base {
		kinds[o.GetKind()]++
	}
	for kind, n := range map[string]int{"Namespace": 1, "ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1,
		"Role": 2, "RoleBinding": 2, "ConfigMap": 1, "Deployment": 1, "Service": 1} {
		if kinds[kind] != n {
			t.Errorf("base has %d %s; want %d", kinds[kind], kind, n)
		}
	}

	// Every flag the Deployments pass exists in the binary's command.
	usage := map[string]string{"run": help(t, "run"), "executor": help(t, "executor")}
	for _, objs := range [][]*unstructured.Unstructured{base, overlay} {
		for _, o := range objs {
			if o.GetKind() != "Deployment" {
				continue
			}
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			c := containers[0].(map[string]any)
			if img := c["image"]; img != "ghcr.io/ferry-dev/reconciler:dev" {
				t.Errorf("%s runs image %v; want the one `make image` builds, ghcr.io/ferry-dev/reconciler:dev", o.GetName(), img)
			}
			args, _, _ := unstructured.NestedStringSlice(c, "args")
			for _, a := range args[1:] {
				name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
				if !regexp.MustCompile(`(?m)^\s+(-\w, )?--` + regexp.QuoteMeta(name) + `\b`).MatchString(usage[args[0]]) {
					t.Errorf("%s passes %s, which `reconciler %s` does not have", o.GetName(), a, args[0])
				}
			}
		}
	}

	// What the service account may and may not do.
	type access struct {
		verb, group, resource, namespace string
	}
	allowed := []access{
		{"create", "cluster.x-k8s.io", "clusters", "default"},
		{"patch", "cluster.x-k8s.io", "machines", "default"},
		{"watch", "cluster.x-k8s.io", "machinedeployments", "default"},
		{"delete", "cluster.x-k8s.io", "machinedeployments", "default"},
		{"create", "controlplane.cluster.x-k8s.io", "kubeadmcontrolplanes", "default"},
		{"patch", "controlplane.cluster.x-k8s.io", "kamajicontrolplanes", "default"},
		{"create", "bootstrap.cluster.x-k8s.io", "kubeadmconfigs", "default"},
		{"create", "infrastructure.cluster.x-k8s.io", "openstackclusters", "default"},
		{"delete", "infrastructure.cluster.x-k8s.io", "openstackservers", "default"},
		{"patch", "infrastructure.cluster.x-k8s.io", "vspheremachinetemplates", "default"},
		{"get", "", "secrets", "default"},
		{"create", "", "secrets", "default"},
		{"list", "", "secrets", "ferry-system"},
		{"update", "coordination.k8s.io", "leases", "ferry-system"},
		{"create", "", "events", "ferry-system"},
	}
	denied := []access{
		{"get", "", "secrets", "kube-system"},
		{"list", "", "secrets", ""},
		{"create", "", "secrets", "ferry-system"},
		{"delete", "", "secrets", "default"},
		{"delete", "cluster.x-k8s.io", "clusters", "default"},
		{"delete", "infrastructure.cluster.x-k8s.io", "openstackclusters", "default"},
		{"get", "", "pods", "default"},
		{"create", "apps", "deployments", "ferry-system"},
		{"create", "rbac.authorization.k8s.io", "clusterrolebindings", ""},
		{"delete", "", "namespaces", ""},
		{"update", "coordination.k8s.io", "leases", "kube-system"},
	}
	cfg := rest.CopyConfig(k.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: serviceAccount, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ferry-system", "system:authenticated"}}
	cs := kubernetes.NewForConfigOrDie(cfg)
	can := func(a access) bool {
		t.Helper()
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: a.verb, Group: a.group, Resource: a.resource, Namespace: a.namespace}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("access review %+v: %v", a, err)
		}
		return r.Status.Allowed
	}
	for _, a := range allowed {
		if !can(a) {
			t.Errorf("the service account may not %s %s.%s in %q; a migration needs it", a.verb, a.resource, a.group, a.namespace)
		}
	}
	for _, a := range denied {
		if can(a) {
			t.Errorf("the service account may %s %s.%s in %q; it should not", a.verb, a.resource, a.group, a.namespace)
		}
	}
}

// help is the usage text of `reconciler <command> --help`.
func help(t *testing.T, command string) string {
	t.Helper()
	out, _ := exec.Command("go", "run", "../cmd/reconciler", command, "--help").CombinedOutput()
	if !strings.Contains(string(out), "Flags:") {
		t.Fatalf("reconciler %s --help:\n%s", command, out)
	}
	return string(out)
}
