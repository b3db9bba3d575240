package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/status"
)

// endState is what a migration leaves, written so that two runs on two
// fixtures compare line by line (IDs, addresses and random names replaced
// by names), and what the run did twice or let out.
type endState struct {
	// lines are the compared state: the world lines (readWorld: the
	// cloud's resources, the CAPI and CAPO objects' specs, labels and
	// owners, the Secrets' names, types, keys and labels, the workload
	// cluster's Nodes and kube-system objects), ferry's comments and
	// commit statuses, and the status file's phases and steps.
	lines []string
	// repeated are effects that happened twice: an object created twice
	// (the management API server's audit log), a cloud resource name
	// carried twice, a comment posted twice.
	repeated []string
	// secrets are the fixture's secret values found in ferry's logs, NATS
	// messages, commits, comments, statuses, Events and metrics; values
	// and scanned say how many values were looked for in how many bytes.
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

// capture reads a world's end state; prs is how many pull requests the
// run opened.
func capture(ctx context.Context, w *world, msgs *recorder, prs int) (*endState, error) {
	wl, err := readWorld(ctx, w, false)
	if err != nil {
		return nil, err
	}
	st := &endState{lines: wl.lines, repeated: wl.repeated}
	created, err := repeatedCreates(w.fx.cloud.Mgmt.AuditLog)
	if err != nil {
		return nil, err
	}
	st.repeated = append(st.repeated, created...)
	lines, repeated, texts, err := w.forgeLines(prs)
	if err != nil {
		return nil, err
	}
	st.lines = append(st.lines, lines...)
	st.repeated = append(st.repeated, repeated...)

	ps, err := w.reader.Read(ctx, w.sc.cluster)
	if err != nil {
		return nil, err
	}
	st.lines = append(st.lines, statusLines(ps, wl.normalize)...)
	if w.fx.drain != nil {
		w.fx.drain.capture(ctx, st)
	}
	sort.Strings(st.lines)
	sort.Strings(st.repeated)

	sc, err := w.scanSecrets(ctx, wl.secrets, msgs.all(), texts)
	if err != nil {
		return nil, err
	}
	st.secrets, st.values, st.scanned = sc.found, len(sc.values), sc.scanned
	return st, nil
}

// statusLines are a status file's phases and steps, a line each, with
// what differs between fixtures normalized.
func statusLines(ps *status.PlanStatus, normalize func(string) string) []string {
	var lines []string
	for _, ph := range ps.Phases {
		lines = append(lines, fmt.Sprintf("status phase %s: %s", ph.Name, ph.State))
		for _, s := range ph.Steps {
			lines = append(lines, normalize(fmt.Sprintf("status step %s %s %s: %s", ph.Name, s.Action, s.Target, s.State)))
		}
	}
	return lines
}

// repeatedCreates are the objects an API server's audit log shows created
// more than once.
func repeatedCreates(auditLog string) ([]string, error) {
	created, err := auditCreates(auditLog)
	if err != nil {
		return nil, err
	}
	var out []string
	for key, n := range created {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s created %d times", key, n))
		}
	}
	sort.Strings(out)
	return out, nil
}

// forgeLines reads ferry's comments on pull requests 1 to prs and its
// commit statuses on their heads and main's commits, back from the forge:
// a line per comment key and pull request and per status context's final
// state on each commit, the comments not there exactly once (one preview
// and one progress comment per pull request), and every comment's and
// status's text, for the secret scan. It fails when the forge does not
// answer.
func (w *world) forgeLines(prs int) (lines, repeated, texts []string, err error) {
	for n := 1; n <= prs; n++ {
		comments, err := w.forge.comments(n)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("read the comments on #%d: %w", n, err)
		}
		texts = append(texts, comments...)
		for _, key := range []string{reconcilerPreviewKey, w.sc.progressKey()} {
			count := 0
			for _, body := range comments {
				if strings.HasPrefix(body, forge.Marker(key)) {
					count++
				}
			}
			lines = append(lines, fmt.Sprintf("comment %s on #%d", key, n))
			if count != 1 {
				repeated = append(repeated, fmt.Sprintf("%d comments %s on #%d", count, key, n))
			}
		}
	}
	shas, err := mainCommits(w.forge.repoDir())
	if err != nil {
		return nil, nil, nil, err
	}
	for _, head := range w.heads {
		shas = append(shas, head)
	}
	// A merge commit's log holds the pull request's head too.
	slices.Sort(shas)
	shas = slices.Compact(shas)
	// Commit status context and commit -> last state.
	final, statusTexts, err := w.forge.statuses(shas)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read the commit statuses: %w", err)
	}
	texts = append(texts, statusTexts...)
	for key, state := range final {
		context, _, _ := strings.Cut(key, " ")
		lines = append(lines, fmt.Sprintf("commit status %s: %s", context, state))
	}
	return lines, repeated, texts, nil
}

// mainCommits are the commits on the main branch of the repository at
// dir: where ferry posts statuses besides pull requests' heads.
func mainCommits(dir string) ([]string, error) {
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return nil, fmt.Errorf("open the plans repository: %w", err)
	}
	ref, err := repo.Reference(plumbing.NewBranchReferenceName("main"), true)
	if err != nil {
		return nil, fmt.Errorf("read main: %w", err)
	}
	commits, err := repo.Log(&git.LogOptions{From: ref.Hash()})
	if err != nil {
		return nil, err
	}
	var shas []string
	err = commits.ForEach(func(c *object.Commit) error {
		shas = append(shas, c.Hash.String())
		return nil
	})
	return shas, err
}

// scanSecrets looks for the values of secrets, the forge's tokens (every
// Gitea account's, or the stand-in's), the webhook secret, the cloud's
// password and the application credential planted beside it in ferry's
// logs, the NATS messages msgs, texts, the Events, the metrics and the
// plans repository (scanWorld).
func (w *world) scanSecrets(ctx context.Context, secrets []corev1.Secret, msgs, texts []string) (*scanner, error) {
	extra := append(w.forge.secrets(), w.webhookSecret, w.fx.cloud.Password, w.appCredential)
	sc := &scanner{values: secretValues(secrets, extra...)}
	return sc, sc.scanWorld(ctx, w, msgs, texts)
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
func (s *endState) diff(other *endState) []string { return diffLines(s.lines, other.lines) }

// diffLines lists the lines in which b differs from a, as multisets: "-"
// only in a, "+" only in b, in the order of the lines.
func diffLines(a, b []string) []string {
	count := func(lines []string) map[string]int {
		m := map[string]int{}
		for _, l := range lines {
			m[l]++
		}
		return m
	}
	mine, theirs := count(a), count(b)
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
