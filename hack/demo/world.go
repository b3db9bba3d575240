package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/events"
	"github.com/ferry-dev/ferry/internal/forge"
	"github.com/ferry-dev/ferry/internal/reconciler"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// layout is how ferry's processes run in a world.
type layout int

const (
	// inProcess: one `reconciler run` with its embedded NATS server and
	// its executors in process, the default a newcomer runs.
	inProcess layout = iota
	// external: the NATS server apart (here: in this program, so that it
	// can be restarted), `reconciler run --executors=false`, and two
	// `reconciler executor` replicas.
	external
	// cluster: the distributed layout of deploy/overlays/cluster: a
	// three-node NATS cluster with three replicas of each stream, two
	// `reconciler run --executors=false --leader-elect` replicas and three
	// `reconciler executor` replicas. The NATS nodes are nats-server's own
	// code run in this program with real routes between them (a stand-in
	// for three nats-server processes, so that a node can be stopped and
	// cut off by a proxy on its routes), TLS on clients and routes as in
	// docs/install.md; ferry's are processes.
	cluster
)

// executors is how many `reconciler executor` replicas the layout runs.
func (l layout) executors() int {
	switch l {
	case external:
		return 2
	case cluster:
		return 3
	}
	return 0
}

// reconcilers are the names of the layout's `reconciler run` processes.
func (l layout) reconcilers() []string {
	if l == cluster {
		return []string{"reconciler-1", "reconciler-2"}
	}
	return []string{"reconciler"}
}

// describe says what the layout runs.
func (l layout) describe() string {
	switch l {
	case external:
		return "an external NATS server, `reconciler run --executors=false`, 2 `reconciler executor` replicas"
	case cluster:
		return "a three-node NATS cluster (in process, real routes) with 3 replicas of each stream, 2 `reconciler run --executors=false --leader-elect` replicas, 3 `reconciler executor` replicas"
	}
	return "one `reconciler run` with its embedded NATS server and executors in process"
}

// leaseNamespace is where the cluster layout's reconcilers hold their
// Lease.
const leaseNamespace = "default"

// world is everything one migration runs on: the scenario's cluster with
// its cloud and API servers, the real CAPI and CAPO managers, the forge
// with the plans repository (a real Gitea, or a Git server with the GitHub
// stand-in), and ferry's processes.
type world struct {
	r     *testenv.Program
	out   *display
	sc    *scenario
	fx    *fixture
	forge forgeHost
	// webhookSecret signs the forge's webhooks to the reconciler;
	// appCredential is the application credential secret planted in the
	// identity Secret's clouds.yaml (plantAppCredential).
	webhookSecret, appCredential string
	// reader reads the status branch as `reconciler status` does.
	reader reconciler.GitStatusStore
	// dir holds the files ferry's processes read (kubeconfig, tokens) and
	// their data directories; logDir their logs.
	dir, logDir string
	bin         string
	layout      layout
	// gitProxy stands between ferry's processes and the forge's Git
	// remote (and its API, when they share a port as on Gitea), for
	// faults; nats is the external layout's NATS server, natsCluster the
	// cluster layout's, and natsConn a connection to either.
	gitProxy    *testenv.Proxy
	nats        *testenv.NATS
	natsCluster *testenv.NATSCluster
	natsConn    *nats.Conn
	// followStatus: each phase is followed by `reconciler status
	// --watch` too, as a team would (the demo, not chaos).
	followStatus bool

	// prs is how many pull requests the world opened (the last one's
	// number); heads their head commits, by number.
	prs   int
	heads map[int]string

	mu    sync.Mutex
	procs map[string]*proc // by name: reconciler, executor-1, ...
}

// proc is one of ferry's processes and how to start it again.
type proc struct {
	args  []string
	pid   int
	start int // how many times it was started
	// metrics and hook are a reconciler's --metrics-addr and
	// --webhook-addr.
	metrics, hook string
}

// newWorld builds a world on the forge of kind (forgeGitea,
// forgeGitHub) and starts ferry in it, waiting for the reconciler's first
// cycle.
func newWorld(ctx context.Context, r *testenv.Program, out *display, bin, logDir string, lay layout, sc *scenario, kind string) (*world, error) {
	w := &world{r: r, out: out, sc: sc, bin: bin, logDir: logDir, layout: lay, procs: map[string]*proc{}}
	fx, err := sc.build(ctx, r, out)
	if err != nil {
		return nil, err
	}
	w.fx = fx
	identity := client.ObjectKey{Namespace: "default", Name: sc.cluster + "-cloud-config"}
	if w.appCredential, err = plantAppCredential(ctx, fx.cloud.Mgmt.Client, identity); err != nil {
		return nil, err
	}
	files := maps.Clone(fx.files)
	files[sc.planPath()] = fx.plan(`""`, "")
	seed := testenv.SeedDir(r, files)
	out.say("==> starting the forge with the plans repository (--forge %s)", kind)
	if w.forge, err = startForge(r, kind, seed, logDir); err != nil {
		return nil, err
	}
	out.say("    %s", w.forge.describe())
	w.gitProxy = testenv.StartProxy(r, w.forge.upstream())

	w.dir = r.TempDir()
	w.webhookSecret = "demo-webhook-secret-" + randomHex(8)
	secrets := map[string]string{"kubeconfig": string(fx.cloud.Mgmt.Kubeconfig(r)), "webhook-secret": w.webhookSecret}
	for name, content := range secrets {
		if err := os.WriteFile(filepath.Join(w.dir, name), []byte(content), 0o600); err != nil {
			return nil, err
		}
	}
	gitFlags, forgeFlags, err := w.forge.ferryFlags(w.gitProxy.Addr, w.dir)
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(w.dir, "kubeconfig")
	run := slices.Concat([]string{"run"}, gitFlags, []string{"--kubeconfig", kubeconfig, "--interval", "10s",
		"--webhook-secret-file", filepath.Join(w.dir, "webhook-secret")}, forgeFlags, []string{"--comment-interval", "1s"})
	// The reconcilers' and the executors' NATS flags: on the cluster,
	// each role is its own NATS user with only its permissions, over TLS
	// with the cluster's CA (--nats-ca).
	var natsFlags, execNATSFlags []string
	switch lay {
	case external:
		w.nats = testenv.StartNATS(r)
		w.natsConn, natsFlags = w.nats.Conn, []string{"--nats-url", w.nats.URL}
		execNATSFlags = natsFlags
	case cluster:
		w.natsCluster = testenv.StartNATSCluster(r, 3)
		w.natsConn = w.natsCluster.Conn
		natsFlags = append(w.natsCluster.RoleFlags(events.RoleReconciler), "--nats-replicas", "3")
		execNATSFlags = append(w.natsCluster.RoleFlags(events.RoleExecutor), "--nats-replicas", "3")
	}
	for i := 1; i <= lay.executors(); i++ {
		name := fmt.Sprintf("executor-%d", i)
		exec := slices.Concat([]string{"executor", "--kubeconfig", kubeconfig}, execNATSFlags, gitFlags,
			[]string{"--data-dir", filepath.Join(w.dir, name)})
		if err := w.startProc(name, exec); err != nil {
			return nil, err
		}
	}
	if lay != inProcess {
		run = slices.Concat(run, []string{"--executors=false"}, natsFlags)
	}
	var hook string
	for i, name := range lay.reconcilers() {
		p := &proc{metrics: testenv.FreeAddr(r), hook: testenv.FreeAddr(r)}
		p.args = slices.Concat(run, []string{"--data-dir", filepath.Join(w.dir, "data-"+name), "--metrics-addr", p.metrics, "--webhook-addr", p.hook})
		if lay == cluster {
			p.args = append(p.args, "--leader-elect", "--leader-election-namespace", leaseNamespace, "--leader-election-identity", name)
		}
		if i == 0 {
			out.say("==> starting the reconciler: %s %s", w.bin, strings.Join(p.args, " "))
		} else {
			out.say("==> starting %s, the standby: the same flags but its data directory, ports and identity", name)
		}
		out.say("    its log: %s; its metrics: http://%s/metrics", w.logFile(name, 1), p.metrics)
		w.procs[name] = p
		if err := w.startProc(name, nil); err != nil {
			return nil, err
		}
		// The first leads (its first cycle makes it ready); the standby
		// is ready once it waits for the Lease.
		if err := w.waitReady(ctx, name); err != nil {
			return nil, err
		}
		// The forge's webhooks go to the last: on the cluster layout the
		// standby, which passes them on to the leader over NATS.
		hook = p.hook
	}
	w.forge.deliver("http://"+hook+"/", w.webhookSecret)
	w.reader = w.forge.remote().store(filepath.Join(w.dir, "status-reader"))
	if fx.drain != nil {
		fx.drain.reader, fx.drain.plan = w.reader, sc.cluster
	}
	return w, nil
}

// randomHex is n random bytes in hex: a secret of this run only, which
// the secret scan can tell from anything else in the logs.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// logFile is the log of the start-th run of process name.
func (w *world) logFile(name string, start int) string {
	if start == 1 {
		return filepath.Join(w.logDir, name+".log")
	}
	return filepath.Join(w.logDir, fmt.Sprintf("%s.%d.log", name, start))
}

// startProc starts one of ferry's processes under name, or starts it again
// with the same arguments when args is nil.
func (w *world) startProc(name string, args []string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.procs[name]
	if p == nil {
		p = &proc{args: args}
		w.procs[name] = p
	}
	p.start++
	pid, err := w.r.StartProcess(w.bin, p.args, w.logFile(name, p.start))
	if err != nil {
		return err
	}
	p.pid = pid
	return nil
}

// kill9 kills processes names at once with SIGKILL, as an OOM kill or a
// node loss would, and starts them again after pause, as Kubernetes
// restarts a pod.
func (w *world) kill9(pause time.Duration, names ...string) error {
	for _, name := range names {
		if err := w.kill(name); err != nil {
			return err
		}
	}
	time.Sleep(pause)
	for _, name := range names {
		if err := w.startProc(name, nil); err != nil {
			return err
		}
	}
	return nil
}

// kill kills process name with SIGKILL.
func (w *world) kill(name string) error {
	w.mu.Lock()
	p := w.procs[name]
	w.mu.Unlock()
	if p == nil {
		return fmt.Errorf("no process %s", name)
	}
	if err := syscall.Kill(-p.pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill -9 %s (pid %d): %w", name, p.pid, err)
	}
	return nil
}

// leading is the reconciler that leads: the only one, or on the cluster
// layout the one whose identity the Lease holds.
func (w *world) leading(ctx context.Context) (string, error) {
	names := w.layout.reconcilers()
	if w.layout != cluster {
		return names[0], nil
	}
	var lease coordinationv1.Lease
	key := client.ObjectKey{Namespace: leaseNamespace, Name: "ferry-reconciler"}
	if err := w.fx.cloud.Mgmt.Client.Get(ctx, key, &lease); err != nil {
		return "", fmt.Errorf("the reconcilers' Lease: %w", err)
	}
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	if !slices.Contains(names, holder) {
		return "", fmt.Errorf("the reconcilers' Lease is held by %q, none of %v", holder, names)
	}
	return holder, nil
}

// waitReady waits until reconciler name's /readyz answers 200 (its first
// cycle, or standing by for the Lease), and fails at once when it exits
// (a port taken, a bad flag).
func (w *world) waitReady(ctx context.Context, name string) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w.mu.Lock()
	addr := w.procs[name].metrics
	w.mu.Unlock()
	return w.out.wait(ctx, name+"'s first cycle or standby (/readyz)", func() (bool, string) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil && !w.running(name) {
			log := w.logFile(name, 1)
			cancel(fmt.Errorf("%s exited; the end of its log (%s):\n%s", name, log, tail(log, 10)))
			return false, "exited"
		}
		if err != nil {
			return false, "not listening yet"
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
}

// migrate approves each phase through a pull request, as the team would,
// and waits for it; it returns when the last phase succeeded, and when
// that was.
func (w *world) migrate(ctx context.Context) (unpaused time.Time, err error) {
	return w.approve(ctx, w.sc.phases, true)
}

// approve opens a pull request for each of phases in turn, numbered on
// from the last one the world opened, that raises spec.approve to it (and
// drops a spec.rollback there was); prints ferry's preview, merges, waits
// for the phase and prints the progress comment, whole when full and
// otherwise their phase tables only. It returns when the last phase
// succeeded, and when that was.
func (w *world) approve(ctx context.Context, phases []string, full bool) (unpaused time.Time, err error) {
	out := w.out
	for _, phase := range phases {
		n := w.openPR(fmt.Sprintf("alice: approve %s (spec.approve: %s)", phase, phase), "Approve "+phase, w.fx.plan(phase, ""))
		if err := w.showComment(ctx, n, reconcilerPreviewKey, "preview", w.heads[n][:12], full); err != nil {
			return time.Time{}, err
		}
		out.say("==> bob merges #%d %s: the merge approves phase %s", n, w.forge.mergeStyle(n), phase)
		w.forge.merge(n, "bob")
		var watch *statusWatch
		if w.followStatus {
			watch = w.watchStatus(ctx, phase)
		}
		want, err := waitPhase(ctx, out, w.reader, w.sc.cluster, phase)
		if err != nil {
			return time.Time{}, err
		}
		if err := watch.end(ctx, out, phase, strings.HasPrefix(want, "| "+phase+" | Succeeded")); err != nil {
			return time.Time{}, err
		}
		unpaused = time.Now()
		if err := w.showComment(ctx, n, w.sc.progressKey(), "progress", want, full); err != nil {
			return time.Time{}, err
		}
		if w.fx.progress != nil {
			out.say("==> %s", w.fx.progress(ctx))
		}
	}
	return unpaused, nil
}

// openPR opens the world's next pull request with plan as the scenario's
// plan file, saying what it does, and returns its number.
func (w *world) openPR(what, title, plan string) int {
	want := w.prs + 1
	w.out.say("\n==> pull request #%d by %s", want, what)
	n, head := w.forge.openPR(want, title, "alice", map[string]string{w.sc.planPath(): plan})
	if n != want {
		// Only the demo opens pull requests: the forge numbers them on.
		w.out.say("    (the forge numbered it #%d)", n)
	}
	if w.heads == nil {
		w.heads = map[int]string{}
	}
	w.prs, w.heads[n] = n, head
	return n
}

// showComment waits for ferry's comment with key on pull request n (what:
// "preview" or "progress") until it contains want, and prints it: whole
// when full, otherwise its phase table (shortComment).
func (w *world) showComment(ctx context.Context, n int, key, what, want string, full bool) error {
	body, err := waitComment(ctx, w.out, w.forge, n, key, fmt.Sprintf("the %s comment on #%d", what, n), want)
	if err != nil {
		return err
	}
	if full {
		w.out.block(fmt.Sprintf("%s comment on #%d", what, n), body)
		return nil
	}
	for _, l := range shortComment(body) {
		w.out.say("    │ %s", l)
	}
	return nil
}

// shortComment is the phase table of one of ferry's comments: a
// preview's "Phases:" lines, or the rows of a progress comment's first
// table, their empty cells left out and the others in aligned columns.
func shortComment(body string) []string {
	var rows []string
	var table [][]string
	inPhases := false
	for _, l := range strings.Split(body, "\n") {
		switch {
		case strings.TrimSpace(l) == "Phases:":
			inPhases = true
		case inPhases && strings.TrimSpace(l) == "":
			return rows
		case inPhases:
			rows = append(rows, strings.TrimSpace(l))
		case strings.HasPrefix(l, "| "):
			cells := strings.Split(strings.Trim(l, "| "), " | ")
			if cells[0] != "Phase" && cells[0] != "---" {
				table = append(table, slices.DeleteFunc(cells, func(c string) bool { return strings.TrimSpace(c) == "" }))
			}
		case table != nil:
			return aligned(table)
		}
	}
	if table != nil {
		return aligned(table)
	}
	return rows
}

// aligned writes rows of cells as lines, each column as wide as its
// widest cell, two spaces apart.
func aligned(rows [][]string) []string {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		var b strings.Builder
		for j, c := range r {
			if j > 0 {
				b.WriteString("  ")
			}
			b.WriteString(c)
			if j < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[j]-utf8.RuneCountInString(c)))
			}
		}
		out[i] = b.String()
	}
	return out
}

// progressElsewhere lists the pull requests other than n whose progress
// comment shows the plan at revision: where ferry mirrors what n's merge
// approved when n has no progress comment.
func (w *world) progressElsewhere(n int, revision string) []string {
	var prs []string
	for m := 1; m <= w.prs; m++ {
		bodies, _ := w.forge.comments(m)
		for _, body := range bodies {
			if m != n && strings.HasPrefix(body, forge.Marker(w.sc.progressKey())) && strings.Contains(body, "at revision "+shortRev(revision)) {
				prs = append(prs, fmt.Sprintf("#%d", m))
			}
		}
	}
	return prs
}

// running reports whether process name is still running.
func (w *world) running(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.procs[name]
	return p != nil && syscall.Kill(p.pid, 0) == nil
}

// tail is the last n lines of file, indented, or why it cannot be read.
func tail(file string, n int) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return "    " + err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	lines = lines[max(0, len(lines)-n):]
	return "    " + strings.Join(lines, "\n    ")
}
