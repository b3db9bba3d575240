package deploy_test

import (
	"context"
	"path"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// clusterOverlay is the clustered layout: reconcilers and executors
// apart, on an existing NATS cluster.
const clusterOverlay = "overlays/cluster"

// applyClusterOverlay applies overlays/cluster over the base already in
// the API server and returns its objects. The overlay changes the base's
// Deployment ferry-reconciler, which ApplyKustomization would leave as the
// base made it (it creates, and skips what exists): that one is deleted
// first, so that the API server takes the overlay's own.
func applyClusterOverlay(t *testing.T, k *testenv.Kube) []*unstructured.Unstructured {
	t.Helper()
	base := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ferry-system", Name: "ferry-reconciler"}}
	if err := k.Client.Delete(context.Background(), base); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete the base's Deployment: %v", err)
	}
	return testenv.ApplyKustomization(t, k, clusterOverlay)
}

// checkClusterOverlay: overlays/cluster, as the API server stored it, is
// what it promises. Two reconcilers under leader election that run no
// executors and three executors, both on three copies of the streams,
// each as its role's NATS user (--nats-user) with the password and CA of
// its own Secret mounted where --nats-password-file and --nats-ca read
// them, and the URL (tls://) from the ferry-config key nats-url; one
// PodDisruptionBudget
// per Deployment, found by matching its selector against the pod
// template's labels, one pod at a time, the reconcilers' also evicting
// unready pods; preferred anti-affinity on the node for each Deployment's
// own pods; the security context and requests of the base.
func checkClusterOverlay(t *testing.T, k *testenv.Kube, overlay []*unstructured.Unstructured) {
	ctx := context.Background()
	get := func(name string) *appsv1.Deployment {
		t.Helper()
		d := &appsv1.Deployment{}
		if err := k.Client.Get(ctx, client.ObjectKey{Namespace: "ferry-system", Name: name}, d); err != nil {
			t.Fatalf("%s: Deployment %s: %v", clusterOverlay, name, err)
		}
		return d
	}
	reconciler, executor := get("ferry-reconciler"), get("ferry-executor")

	var config *unstructured.Unstructured
	for _, o := range overlay {
		if o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), "ferry-config") {
			config = o
		}
	}
	if config == nil {
		t.Fatalf("%s has no ConfigMap ferry-config", clusterOverlay)
	}

	for _, want := range []struct {
		d        *appsv1.Deployment
		replicas int32
		command  string
		flags    map[string]string
		secret   string
	}{
		{reconciler, 2, "run", map[string]string{"executors": "false", "leader-elect": "true", "nats-replicas": "3", "nats-user": "ferry-reconciler"}, "ferry-nats-reconciler"},
		{executor, 3, "executor", map[string]string{"nats-replicas": "3", "nats-user": "ferry-executor"}, "ferry-nats-executor"},
	} {
		d, name := want.d, want.d.Name
		if got := ptr.Deref(d.Spec.Replicas, 1); got != want.replicas {
			t.Errorf("%s: %s has %d replicas; want %d", clusterOverlay, name, got, want.replicas)
		}
		pod := d.Spec.Template.Spec
		if len(pod.Containers) != 1 {
			t.Fatalf("%s: %s has %d containers; want 1", clusterOverlay, name, len(pod.Containers))
		}
		c := pod.Containers[0]
		if len(c.Args) == 0 || c.Args[0] != want.command {
			t.Errorf("%s: %s runs %v; want `reconciler %s`", clusterOverlay, name, c.Args, want.command)
		}
		for flag, value := range want.flags {
			if got, ok := flagValue(c.Args, flag); !ok {
				t.Errorf("%s: %s does not pass --%s; want --%s=%s", clusterOverlay, name, flag, flag, value)
			} else if got != value {
				t.Errorf("%s: %s passes --%s=%s; want %s", clusterOverlay, name, flag, got, value)
			}
		}

		// The NATS URL: --nats-url expands the variable that the overlay's
		// ConfigMap sets from its key nats-url.
		url, _ := flagValue(c.Args, "nats-url")
		if !strings.HasPrefix(url, "$(") || !strings.HasSuffix(url, ")") {
			t.Errorf("%s: %s has --nats-url=%q; want it from the ConfigMap, $(VAR)", clusterOverlay, name, url)
		}
		fromConfig := false
		for _, e := range c.Env {
			if "$("+e.Name+")" != url || e.ValueFrom == nil || e.ValueFrom.ConfigMapKeyRef == nil {
				continue
			}
			ref := e.ValueFrom.ConfigMapKeyRef
			value, _, _ := unstructured.NestedString(config.Object, "data", ref.Key)
			fromConfig = ref.Name == config.GetName() && ref.Key == "nats-url" && strings.HasPrefix(value, "tls://")
		}
		if !fromConfig {
			t.Errorf("%s: %s does not read --nats-url from key nats-url of ConfigMap %s (a tls:// URL)", clusterOverlay, name, config.GetName())
		}

		// The credentials: --nats-password-file and --nats-ca name keys
		// password and ca.crt of a mount of the role's own Secret.
		for flag, key := range map[string]string{"nats-password-file": "password", "nats-ca": "ca.crt"} {
			file, _ := flagValue(c.Args, flag)
			if !secretMounted(pod, c, want.secret, key, file) {
				t.Errorf("%s: %s has --%s=%q, which is no key %s of Secret %s mounted in its container", clusterOverlay, name, flag, file, key, want.secret)
			}
		}
		if _, ok := flagValue(c.Args, "nats-creds"); ok {
			t.Errorf("%s: %s passes --nats-creds besides its role's user", clusterOverlay, name)
		}

		// Spread over nodes, preferred: the term selects the Deployment's
		// own pods, on kubernetes.io/hostname.
		own := labels.Set(d.Spec.Template.Labels)
		spread := false
		if a := pod.Affinity; a != nil && a.PodAntiAffinity != nil {
			for _, term := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
				spread = spread || term.PodAffinityTerm.TopologyKey == "kubernetes.io/hostname" && selects(t, term.PodAffinityTerm.LabelSelector, own)
			}
			if n := len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution); n > 0 {
				t.Errorf("%s: %s has %d required anti-affinity terms: on fewer nodes than replicas, pods would stay Pending", clusterOverlay, name, n)
			}
		}
		if !spread {
			t.Errorf("%s: %s has no preferred pod anti-affinity on kubernetes.io/hostname selecting its own pods (%v): %+v", clusterOverlay, name, own, pod.Affinity)
		}
		// And over zones, where the nodes have them: a wish, not a
		// condition to run (ScheduleAnyway).
		zones := false
		for _, spread := range pod.TopologySpreadConstraints {
			if spread.WhenUnsatisfiable != corev1.ScheduleAnyway || !selects(t, spread.LabelSelector, own) {
				t.Errorf("%s: %s's topology spread on %s: want ScheduleAnyway over its own pods; got %s over %v", clusterOverlay, name, spread.TopologyKey, spread.WhenUnsatisfiable, spread.LabelSelector)
			}
			zones = zones || spread.TopologyKey == "topology.kubernetes.io/zone"
		}
		if !zones {
			t.Errorf("%s: %s has no topology spread over topology.kubernetes.io/zone", clusterOverlay, name)
		}

		// The base's hardening and sizing, kept.
		sc := c.SecurityContext
		if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot ||
			sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			t.Errorf("%s: %s: want non-root, a read-only root, no privilege escalation, capabilities dropped; got pod %+v, container %+v", clusterOverlay, name, pod.SecurityContext, sc)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: %s: want cpu and memory requests and a memory limit; got %+v", clusterOverlay, name, c.Resources)
		}
	}

	// PodDisruptionBudgets: each Deployment's pods are selected by
	// exactly one (an eviction of a pod that two select fails), which
	// lets one pod go at a time.
	var pdbs policyv1.PodDisruptionBudgetList
	if err := k.Client.List(ctx, &pdbs, client.InNamespace("ferry-system")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		d         *appsv1.Deployment
		unhealthy policyv1.UnhealthyPodEvictionPolicyType
	}{
		// Both reconcilers are Ready, the standby too (/readyz answers
		// "standing by"); one that is not may go whatever the budget.
		{reconciler, policyv1.AlwaysAllow},
		{executor, ""},
	} {
		var matching []policyv1.PodDisruptionBudget
		for _, p := range pdbs.Items {
			if selects(t, p.Spec.Selector, labels.Set(want.d.Spec.Template.Labels)) {
				matching = append(matching, p)
			}
		}
		if len(matching) != 1 {
			t.Errorf("%s: %d PodDisruptionBudgets select the pods of %s (%v); want 1", clusterOverlay, len(matching), want.d.Name, want.d.Spec.Template.Labels)
			continue
		}
		p := matching[0]
		if p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.String() != "1" || p.Spec.MinAvailable != nil {
			t.Errorf("%s: PodDisruptionBudget %s for %s: maxUnavailable %v, minAvailable %v; want maxUnavailable 1", clusterOverlay, p.Name, want.d.Name, p.Spec.MaxUnavailable, p.Spec.MinAvailable)
		}
		var unhealthy policyv1.UnhealthyPodEvictionPolicyType
		if p.Spec.UnhealthyPodEvictionPolicy != nil {
			unhealthy = *p.Spec.UnhealthyPodEvictionPolicy
		}
		testenv.Expect(t, "unhealthyPodEvictionPolicy of the PodDisruptionBudget for "+want.d.Name, unhealthy, want.unhealthy)
	}
}

// flagValue is the value args give to --name: the last --name=value
// wins, as with pflag, and a bare --name (a boolean flag; the manifests
// give every other flag as --name=value) is "true". ok is whether any
// gives one.
func flagValue(args []string, name string) (value string, ok bool) {
	for _, a := range args {
		if v, found := strings.CutPrefix(a, "--"+name+"="); found {
			value, ok = v, true
		} else if a == "--"+name {
			value, ok = "true", true
		}
	}
	return value, ok
}

// secretMounted reports whether file is key key of Secret secret,
// through a volume mounted in c.
func secretMounted(pod corev1.PodSpec, c corev1.Container, secret, key, file string) bool {
	for _, m := range c.VolumeMounts {
		if m.SubPath != "" || path.Clean(m.MountPath) != path.Dir(file) {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name != m.Name || v.Secret == nil || v.Secret.SecretName != secret {
				continue
			}
			if len(v.Secret.Items) == 0 {
				return path.Base(file) == key
			}
			for _, item := range v.Secret.Items {
				if item.Key == key && item.Path == path.Base(file) {
					return true
				}
			}
		}
	}
	return false
}

// selects reports whether selector selects pods labelled set, as the API
// reads it: a nil selector selects nothing, an empty one everything.
func selects(t *testing.T, selector *metav1.LabelSelector, set labels.Set) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		t.Errorf("selector %v: %v", selector, err)
		return false
	}
	return s.Matches(set)
}
