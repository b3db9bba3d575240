package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/forge"
)

// endState is what a migration leaves, written so that two runs on two
// fixtures compare line by line (IDs, addresses and random names replaced
// by names), and what the run did twice or let out.
type endState struct {
	// lines are the compared state: the CAPI and CAPO objects' specs,
	// labels and owners, the Secrets' names, types, keys and labels, the
	// cloud's resources, ferry's comments and commit statuses, and the
	// status file's phases and steps.
	lines []string
	// repeated are effects that happened twice: an object created twice
	// (the management API server's audit log), a cloud resource name
	// carried twice, a comment posted twice.
	repeated []string
	// secrets are the fixture's secret values found in ferry's logs, NATS
	// messages, commits, comments and statuses; values and scanned say
	// how many values were looked for in how many bytes.
	secrets         []string
	values, scanned int
	// violations are what a replace run's cutover must never do: break
	// the budget, leave a node cordoned, miss a probe (captureDrain).
	violations []string
}

// objectKinds are the CAPI and CAPO kinds whose objects are compared.
var objectKinds = []schema.GroupVersionKind{
	{Group: "cluster.x-k8s.io", Version: "v1beta1", Kind: "Cluster"},
	{Group: "cluster.x-k8s.io", Version: "v1beta1", Kind: "MachineDeployment"},
	{Group: "cluster.x-k8s.io", Version: "v1beta1", Kind: "MachineSet"},
	{Group: "cluster.x-k8s.io", Version: "v1beta1", Kind: "Machine"},
	{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta1", Kind: "KubeadmControlPlane"},
	{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta1", Kind: "KubeadmConfig"},
	{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta1", Kind: "KubeadmConfigTemplate"},
	{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta1", Kind: "OpenStackCluster"},
	{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta1", Kind: "OpenStackMachine"},
	{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta1", Kind: "OpenStackMachineTemplate"},
	{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "OpenStackServer"},
}

// The workload API server's port, random per run, after the endpoint's
// address.
var (
	endpointPort = regexp.MustCompile(`<endpoint-ip>:\d+`)
	endpointJSON = regexp.MustCompile(`("host":"<endpoint-ip>","port":)\d+`)
)

// secretNamespaces are where the fixture's Secrets are.
var secretNamespaces = []string{"default", "ferry-system"}

// capture reads a world's end state.
func capture(ctx context.Context, w *world, msgs *recorder) (*endState, error) {
	st := &endState{}
	cloud, err := w.fx.cloud.State(ctx, w.r)
	if err != nil {
		return nil, err
	}
	norm := cloud.Normalize
	normalize := func(s string) string {
		s = norm(s)
		s = endpointPort.ReplaceAllString(s, `<endpoint-ip>:<port>`)
		s = endpointJSON.ReplaceAllString(s, `${1}"<port>"`)
		if w.fx.normalize != nil {
			s = w.fx.normalize(s)
		}
		return s
	}
	for _, l := range cloud.Lines {
		st.lines = append(st.lines, normalize(l))
	}
	st.repeated = append(st.repeated, cloud.Repeated...)

	c := w.fx.cloud.Mgmt.Client
	for _, gvk := range objectKinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, list, client.InNamespace("default")); err != nil {
			return nil, fmt.Errorf("list %s: %w", gvk.Kind, err)
		}
		for _, o := range list.Items {
			var owners []string
			for _, ref := range o.GetOwnerReferences() {
				owners = append(owners, fmt.Sprintf("%s/%s controller=%t", ref.Kind, ref.Name, ref.Controller != nil && *ref.Controller))
			}
			sort.Strings(owners)
			view, err := json.Marshal(map[string]any{"spec": o.Object["spec"], "labels": o.GetLabels(), "owners": owners})
			if err != nil {
				return nil, err
			}
			st.lines = append(st.lines, normalize(fmt.Sprintf("%s %s: %s", gvk.Kind, o.GetName(), view)))
		}
	}
	var secrets []corev1.Secret
	for _, ns := range secretNamespaces {
		list := &corev1.SecretList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("list Secrets in %s: %w", ns, err)
		}
		for _, s := range list.Items {
			secrets = append(secrets, s)
			var owners []string
			for _, ref := range s.OwnerReferences {
				owners = append(owners, ref.Kind+"/"+ref.Name)
			}
			st.lines = append(st.lines, normalize(fmt.Sprintf("Secret %s/%s: %s, keys %v, labels %v, owners %v",
				ns, s.Name, s.Type, slices.Sorted(maps.Keys(s.Data)), s.Labels, owners)))
		}
	}

	created, err := auditCreates(w.fx.cloud.Mgmt.AuditLog)
	if err != nil {
		return nil, err
	}
	for key, n := range created {
		if n > 1 {
			st.repeated = append(st.repeated, fmt.Sprintf("%s created %d times", key, n))
		}
	}

	// Comments: one preview and one progress comment per pull request.
	var texts []string
	for n := 1; n <= len(w.sc.phases); n++ {
		for _, key := range []string{reconcilerPreviewKey, w.sc.progressKey()} {
			count := 0
			for _, cm := range w.gh.Comments(n) {
				texts = append(texts, cm.Body)
				if strings.HasPrefix(cm.Body, forge.Marker(key)) {
					count++
				}
			}
			st.lines = append(st.lines, fmt.Sprintf("comment %s on #%d", key, n))
			if count != 1 {
				st.repeated = append(st.repeated, fmt.Sprintf("%d comments %s on #%d", count, key, n))
			}
		}
	}
	final := map[string]string{} // commit status context and commit -> last state
	for _, s := range w.gh.Statuses() {
		final[s.Context+" "+s.SHA] = s.State
		texts = append(texts, s.Description)
	}
	for key, state := range final {
		context, _, _ := strings.Cut(key, " ")
		st.lines = append(st.lines, fmt.Sprintf("commit status %s: %s", context, state))
	}

	ps, err := w.reader.Read(ctx, w.sc.cluster)
	if err != nil {
		return nil, err
	}
	for _, ph := range ps.Phases {
		st.lines = append(st.lines, fmt.Sprintf("status phase %s: %s", ph.Name, ph.State))
		for _, s := range ph.Steps {
			st.lines = append(st.lines, normalize(fmt.Sprintf("status step %s %s %s: %s", ph.Name, s.Action, s.Target, s.State)))
		}
	}
	if w.fx.drain != nil {
		w.fx.drain.capture(ctx, st)
	}
	sort.Strings(st.lines)
	sort.Strings(st.repeated)

	sc := &scanner{values: secretValues(secrets, w.gh.Token, string(w.repo.WebhookSecret), w.fx.cloud.Password)}
	if err := sc.scanWorld(w, msgs.all(), texts); err != nil {
		return nil, err
	}
	st.secrets, st.values, st.scanned = sc.found, len(sc.values), sc.scanned
	return st, nil
}

// problems lists what a run must never do.
func (s *endState) problems() []string {
	var out []string
	for _, r := range s.repeated {
		out = append(out, "repeated: "+r)
	}
	for _, f := range s.secrets {
		out = append(out, "secret: "+f)
	}
	for _, v := range s.violations {
		out = append(out, "violation: "+v)
	}
	return out
}

// diff lists the lines in which other differs from s: "-" only in s, "+"
// only in other.
func (s *endState) diff(other *endState) []string {
	count := func(lines []string) map[string]int {
		m := map[string]int{}
		for _, l := range lines {
			m[l]++
		}
		return m
	}
	mine, theirs := count(s.lines), count(other.lines)
	var out []string
	for l, n := range mine {
		for range n - theirs[l] {
			out = append(out, "- "+l)
		}
	}
	for l, n := range theirs {
		for range n - mine[l] {
			out = append(out, "+ "+l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][2:] < out[j][2:] })
	return out
}

// auditCreates counts the successful creates of each named object in an
// API server's audit log (resource, namespace, name).
func auditCreates(path string) (map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev struct {
			Verb      string `json:"verb"`
			ObjectRef struct {
				Resource, Namespace, Name, Subresource string
			} `json:"objectRef"`
			ResponseStatus struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("audit log %s: %w", path, err)
		}
		ref := ev.ObjectRef
		if ev.Verb != "create" || ev.ResponseStatus.Code != 201 || ref.Name == "" || ref.Subresource != "" || ephemeral[ref.Resource] {
			continue
		}
		counts[ref.Resource+" "+ref.Namespace+"/"+ref.Name]++
	}
	return counts, sc.Err()
}

// ephemeral are resources whose objects are meant to be created again and
// again (reviews, events, leader-election leases).
var ephemeral = map[string]bool{
	"events": true, "leases": true, "tokenreviews": true, "subjectaccessreviews": true,
	"selfsubjectaccessreviews": true, "selfsubjectrulesreviews": true, "localsubjectaccessreviews": true,
}
