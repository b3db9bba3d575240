package deploy_test

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

const serviceAccount = "system:serviceaccount:ferry-system:ferry-reconciler"

func TestManifests(t *testing.T) {
	k := testenv.StartKube(t)
	mustCreate(t, k.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: planNamespace}})
	base := testenv.ApplyKustomization(t, k, ".")
	overlay := applyClusterOverlay(t, k)
	testenv.ApplyKustomizationIn(t, k, "plan-namespace", planNamespace)
	checkClusterOverlay(t, k, overlay)

	kinds := map[string]int{}
	for _, o := range base {
		kinds[o.GetKind()]++
	}
	for kind, n := range map[string]int{"Namespace": 1, "ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1,
		"Role": 1, "RoleBinding": 1, "ConfigMap": 1, "Deployment": 1, "Service": 1, "NetworkPolicy": 1,
		"ValidatingAdmissionPolicy": 1, "ValidatingAdmissionPolicyBinding": 1} {
		if kinds[kind] != n {
			t.Errorf("base has %d %s; want %d", kinds[kind], kind, n)
		}
	}
	for _, o := range base {
		if o.GetKind() == "Role" && o.GetNamespace() != "ferry-system" {
			t.Errorf("base has Role %s/%s: it grants ferry nothing outside ferry-system (see overlays/plan-namespaces)", o.GetNamespace(), o.GetName())
		}
	}

	// overlays/plan-namespaces is the base and the plan-namespace Role in
	// default, bound to ferry's service account.
	var inDefault []string
	for _, o := range testenv.Kustomize(t, "overlays/plan-namespaces") {
		if o.GetNamespace() != "default" {
			continue
		}
		inDefault = append(inDefault, o.GetKind()+"/"+o.GetName())
		if o.GetKind() == "RoleBinding" {
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			testenv.Expect(t, "subjects of the RoleBinding in default", subjects,
				[]any{map[string]any{"kind": "ServiceAccount", "name": "ferry-reconciler", "namespace": "ferry-system"}})
		}
	}
	testenv.Expect(t, "what overlays/plan-namespaces adds to default", inDefault, []string{"Role/ferry-plan-secrets", "RoleBinding/ferry-plan-secrets"})

	// Every flag the Deployments pass exists in the binary's command.
	usage := map[string]string{"run": help(t, "run"), "executor": help(t, "executor")}
	for _, objs := range [][]*unstructured.Unstructured{base, overlay} {
		for _, o := range objs {
			if o.GetKind() != "Deployment" {
				continue
			}
			checkSecretsReadable(t, o)
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

	// What RBAC lets the service account do, by verb (the admission
	// policy then narrows the deletions: access_test.go tries them).
	type access struct {
		verb, group, resource, namespace, name string
	}
	allowed := []access{
		{verb: "list", group: "cluster.x-k8s.io", resource: "clusters"},
		{verb: "watch", group: "infrastructure.cluster.x-k8s.io", resource: "openstackservers"},
		{verb: "create", group: "cluster.x-k8s.io", resource: "clusters", namespace: "default"},
		{verb: "patch", group: "cluster.x-k8s.io", resource: "machines", namespace: "default"},
		{verb: "delete", group: "cluster.x-k8s.io", resource: "machinedeployments", namespace: planNamespace},
		{verb: "create", group: "controlplane.cluster.x-k8s.io", resource: "kubeadmcontrolplanes", namespace: "default"},
		{verb: "patch", group: "controlplane.cluster.x-k8s.io", resource: "kamajicontrolplanes", namespace: "default"},
		{verb: "create", group: "bootstrap.cluster.x-k8s.io", resource: "kubeadmconfigs", namespace: "default"},
		{verb: "create", group: "infrastructure.cluster.x-k8s.io", resource: "openstackclusters", namespace: "default"},
		{verb: "create", group: "infrastructure.cluster.x-k8s.io", resource: "openstackmachinetemplates", namespace: "default"},
		{verb: "delete", group: "infrastructure.cluster.x-k8s.io", resource: "openstackservers", namespace: "default"},
		{verb: "get", resource: "secrets", namespace: planNamespace},
		{verb: "watch", resource: "secrets", namespace: planNamespace},
		{verb: "create", resource: "secrets", namespace: planNamespace},
		{verb: "patch", resource: "secrets", namespace: planNamespace},
		{verb: "delete", resource: "secrets", namespace: planNamespace},
		{verb: "create", resource: "events", namespace: planNamespace},
		{verb: "patch", resource: "events", namespace: planNamespace},
		{verb: "list", resource: "secrets", namespace: "ferry-system"},
		{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: "ferry-system"},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "ferry-system", name: "ferry-reconciler"},
		{verb: "get", resource: "configmaps", namespace: "ferry-system", name: "ferry-history"},
		{verb: "update", resource: "configmaps", namespace: "ferry-system", name: "ferry-history"},
	}
	denied := []access{
		{verb: "get", resource: "secrets", namespace: "default"},
		{verb: "update", resource: "secrets", namespace: "default"},
		{verb: "create", resource: "secrets", namespace: "default"},
		{verb: "update", resource: "secrets", namespace: planNamespace},
		{verb: "get", resource: "secrets", namespace: "kube-system"},
		{verb: "list", resource: "secrets"},
		{verb: "create", resource: "secrets", namespace: "ferry-system"},
		{verb: "delete", resource: "secrets", namespace: "ferry-system"},
		{verb: "create", resource: "events", namespace: "default"},
		{verb: "create", resource: "events", namespace: "ferry-system"},
		{verb: "update", group: "cluster.x-k8s.io", resource: "machinedeployments", namespace: planNamespace},
		{verb: "deletecollection", group: "cluster.x-k8s.io", resource: "machinedeployments", namespace: planNamespace},
		{verb: "create", group: "cluster.x-k8s.io", resource: "clusterclasses", namespace: "default"},
		{verb: "create", group: "infrastructure.cluster.x-k8s.io", resource: "dockerclusters", namespace: "default"},
		{verb: "patch", group: "infrastructure.cluster.x-k8s.io", resource: "dockermachinetemplates", namespace: "default"},
		{verb: "create", group: "infrastructure.cluster.x-k8s.io", resource: "openstackclustertemplates", namespace: "default"},
		{verb: "create", group: "controlplane.cluster.x-k8s.io", resource: "kamajicontrolplanes", namespace: "default"},
		{verb: "delete", group: "controlplane.cluster.x-k8s.io", resource: "kamajicontrolplanes", namespace: "default"},
		{verb: "get", resource: "pods", namespace: "default"},
		{verb: "create", group: "apps", resource: "deployments", namespace: "ferry-system"},
		{verb: "create", group: "rbac.authorization.k8s.io", resource: "clusterrolebindings"},
		{verb: "delete", group: "admissionregistration.k8s.io", resource: "validatingadmissionpolicies"},
		{verb: "delete", resource: "namespaces"},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "ferry-system", name: "another-lease"},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system"},
		{verb: "update", resource: "configmaps", namespace: "ferry-system", name: "another-configmap"},
		{verb: "delete", resource: "configmaps", namespace: "ferry-system", name: "ferry-history"},
		{verb: "update", resource: "configmaps", namespace: "default"},
	}
	cfg := rest.CopyConfig(k.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: serviceAccount, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ferry-system", "system:authenticated"}}
	cs := kubernetes.NewForConfigOrDie(cfg)
	can := func(a access) bool {
		t.Helper()
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: a.verb, Group: a.group, Resource: a.resource, Namespace: a.namespace, Name: a.name}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("access review %+v: %v", a, err)
		}
		return r.Status.Allowed
	}
	for _, a := range allowed {
		if !can(a) {
			t.Errorf("the service account may not %s %s.%s %q in %q; a migration needs it", a.verb, a.resource, a.group, a.name, a.namespace)
		}
	}
	for _, a := range denied {
		if can(a) {
			t.Errorf("the service account may %s %s.%s %q in %q; it should not", a.verb, a.resource, a.group, a.name, a.namespace)
		}
	}
}

// TestNetworkPolicy: the reconciler's NetworkPolicy selects the
// Deployment's pods, admits ingress on exactly the ports its Service
// exposes (by the container ports' names and numbers), from anywhere,
// and leaves egress open. Whether a cluster enforces it is its network
// plugin's business: this checks what the policy says.
func TestNetworkPolicy(t *testing.T) {
	var policy, deployment, service *unstructured.Unstructured
	for _, o := range testenv.Kustomize(t, ".") {
		switch o.GetKind() {
		case "NetworkPolicy":
			policy = o
		case "Deployment":
			deployment = o
		case "Service":
			service = o
		}
	}
	if policy == nil || deployment == nil || service == nil {
		t.Fatal("deploy/ has no NetworkPolicy, Deployment or Service")
	}
	testenv.Expect(t, "the policy's namespace", policy.GetNamespace(), deployment.GetNamespace())

	podLabels, _, _ := unstructured.NestedStringMap(deployment.Object, "spec", "template", "metadata", "labels")
	selector, _, _ := unstructured.NestedStringMap(policy.Object, "spec", "podSelector", "matchLabels")
	if len(selector) == 0 {
		t.Fatal("the NetworkPolicy selects every pod of its namespace")
	}
	for k, v := range selector {
		if podLabels[k] != v {
			t.Errorf("the NetworkPolicy selects %s=%s, which the reconciler's pods (%v) do not have", k, v, podLabels)
		}
	}
	if exprs, _, _ := unstructured.NestedSlice(policy.Object, "spec", "podSelector", "matchExpressions"); len(exprs) > 0 {
		t.Errorf("the NetworkPolicy's podSelector has matchExpressions %v; this test reads matchLabels only", exprs)
	}

	// The container ports, by name and number.
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	containerPorts := map[string]int64{}
	for _, c := range containers {
		ports, _, _ := unstructured.NestedSlice(c.(map[string]any), "ports")
		for _, p := range ports {
			p := p.(map[string]any)
			containerPorts[p["name"].(string)] = p["containerPort"].(int64)
		}
	}
	// resolve is the container port a policy's or Service's port names
	// (by name or number), or "".
	resolve := func(port any) string {
		for name, number := range containerPorts {
			if port == name || port == number {
				return name
			}
		}
		return ""
	}
	servicePorts := map[string]bool{}
	ports, _, _ := unstructured.NestedSlice(service.Object, "spec", "ports")
	for _, p := range ports {
		target := p.(map[string]any)["targetPort"]
		name := resolve(target)
		if name == "" {
			t.Errorf("the Service's targetPort %v is no container port of the reconciler (%v)", target, containerPorts)
		}
		servicePorts[name] = true
	}

	types, _, _ := unstructured.NestedStringSlice(policy.Object, "spec", "policyTypes")
	testenv.Expect(t, "policyTypes (egress stays open: the API server, Git, the forge, NATS, OpenStack)", types, []string{"Ingress"})
	rules, _, _ := unstructured.NestedSlice(policy.Object, "spec", "ingress")
	admitted := map[string]bool{}
	for _, r := range rules {
		rule := r.(map[string]any)
		ports, _ := rule["ports"].([]any)
		if len(ports) == 0 {
			t.Errorf("an ingress rule without ports admits every port: %v", rule)
		}
		for _, p := range ports {
			p := p.(map[string]any)
			if p["protocol"] != "TCP" || p["endPort"] != nil {
				t.Errorf("ingress port %v: want one TCP port", p)
			}
			name := resolve(p["port"])
			if name == "" {
				t.Errorf("the NetworkPolicy admits port %v, which no container of the reconciler has (%v)", p["port"], containerPorts)
			}
			admitted[name] = true
		}
	}
	testenv.Expect(t, "the ports the NetworkPolicy admits", admitted, servicePorts)
	testenv.Expect(t, "the ports admitted are webhook and metrics", admitted, map[string]bool{"webhook": true, "metrics": true})

	// The executors of overlays/cluster listen on no port: their policy
	// admits no ingress at all, and leaves egress open too.
	found := false
	for _, o := range testenv.Kustomize(t, clusterOverlay) {
		if o.GetKind() != "NetworkPolicy" || o.GetName() != "ferry-executor" {
			continue
		}
		found = true
		selector, _, _ := unstructured.NestedStringMap(o.Object, "spec", "podSelector", "matchLabels")
		testenv.Expect(t, "the executors' policy selects", selector, map[string]string{"app.kubernetes.io/name": "ferry-executor"})
		types, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "policyTypes")
		testenv.Expect(t, "the executors' policyTypes", types, []string{"Ingress"})
		rules, _, _ := unstructured.NestedSlice(o.Object, "spec", "ingress")
		testenv.Expect(t, "the executors' ingress rules", len(rules), 0)
	}
	testenv.Expect(t, "overlays/cluster has a NetworkPolicy for the executors", found, true)
}

// help is the usage text of `reconciler <command> --help`.
func help(t *testing.T, command string) string {
	t.Helper()
	// Built as make build builds it (static, path-free): the compiled
	// packages are the image's, which make test builds anyway.
	cmd := exec.Command("go", "run", "-trimpath", "../cmd/reconciler", command, "--help")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "Flags:") {
		t.Fatalf("reconciler %s --help:\n%s", command, out)
	}
	return string(out)
}

// checkSecretsReadable checks that a Deployment whose pods run as a user
// other than root can read the Secrets they mount: a kubelet writes a
// Secret's files owned by root, and gives the pod's fsGroup read access
// (0400 becomes 0440, group fsGroup) only when it has one, so a mode
// without read for others is readable only through fsGroup. (Seen on a real kubelet: the clustered
// overlay's executor, without fsGroup, could not read its credentials.)
func checkSecretsReadable(t *testing.T, deployment *unstructured.Unstructured) {
	t.Helper()
	pod, _, _ := unstructured.NestedMap(deployment.Object, "spec", "template", "spec")
	user, nonRoot, _ := unstructured.NestedInt64(pod, "securityContext", "runAsUser")
	if !nonRoot || user == 0 {
		return
	}
	_, hasFSGroup, _ := unstructured.NestedInt64(pod, "securityContext", "fsGroup")
	volumes, _, _ := unstructured.NestedSlice(pod, "volumes")
	for _, v := range volumes {
		secret, ok, _ := unstructured.NestedMap(v.(map[string]any), "secret")
		if !ok {
			continue
		}
		mode, set, _ := unstructured.NestedInt64(secret, "defaultMode")
		if !set {
			mode = 0o644 // the API's default
		}
		if mode&0o004 == 0 && !hasFSGroup {
			t.Errorf("%s mounts Secret %v with mode %#o as user %d and no fsGroup: a kubelet writes it root:root, which the user cannot read; set fsGroup",
				deployment.GetName(), secret["secretName"], mode, user)
		}
	}
}
