package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// Baseline is the kubectl baseline's figures: seed 000's phases done by
// shell scripts, one kubectl process per change, on a fleet of its own.
type Baseline struct {
	Plans            int     `json:"plans"`
	Parallel         int     `json:"parallel"`
	WallSeconds      float64 `json:"wallSeconds"`
	SecondsPerPlan   float64 `json:"secondsPerPlan"`
	KubectlProcesses int     `json:"kubectlProcesses"`
	// KubectlCPUSeconds is the CPU time of the scripts' processes: kubectl's,
	// and the little that the shells and sleeps around them take.
	KubectlCPUSeconds float64 `json:"kubectlCPUSeconds"`
	// FerrySpeedup is the baseline's seconds per plan over ferry's.
	FerrySpeedup float64 `json:"ferrySpeedup"`
}

// baseline runs the kubectl baseline: a fleet shaped like ferry's, in
// namespace "baseline", whose clusters are adopted by scripts that do what
// a person following seed 000's runbook does (see script). Each cluster is
// the twin of the cluster of ferry's fleet with the same number, and its
// manifests are the objects ferry created for that twin, so that after the
// scripts both must look the same. It runs after ferry's reconciler
// stopped: the two do not share the cores, and the baseline's clusters
// (their servers in the cloud stand-in's listing) do not weigh on ferry's
// figures.
type baseline struct {
	kubectl  string // Debian's, see hack/kubectl.sh
	plans    int    // how many of ferry's clusters get a twin
	parallel int    // scripts at once
	example  string // where one script is kept for people to read

	mgmt, workload *testenv.Kube
	proxy          *workloadProxy
	cloud          *cloudStandIn
	ferry          *fleet
}

// adoption is one baseline cluster's script and its twin.
type adoption struct {
	cluster string
	dir     string // adopt.sh, adopt.log and the workload kubeconfig
	twin    *adopted
	r       *renamer
}

func (a *adoption) log() string { return filepath.Join(a.dir, "adopt.log") }

func (b *baseline) run(ctx context.Context, p *testenv.Program, logf func(string, ...any)) (*Baseline, error) {
	logf("kubectl baseline: creating %d clusters to adopt in namespace baseline (not timed)", b.plans)
	f := &fleet{namespace: "baseline", prefix: "b", workers: b.ferry.workers}
	if err := f.create(p, b.mgmt, b.workload, b.proxy, b.cloud, b.plans); err != nil {
		return nil, fmt.Errorf("baseline fleet: %w", err)
	}
	dir := p.TempDir()
	env, err := b.scriptEnv(p, dir)
	if err != nil {
		return nil, err
	}
	adoptions, err := b.writeScripts(ctx, f, dir)
	if err != nil {
		return nil, err
	}
	logf("kubectl baseline: running %d scripts, %d at a time (one is kept in %s)", len(adoptions), b.parallel, b.example)
	wall, cpu, err := b.runScripts(ctx, logf, env, adoptions)
	if err != nil {
		return nil, err
	}
	logf("kubectl baseline: adopted %d clusters in %s; checking them against ferry's", len(adoptions), wall.Round(100*time.Millisecond))
	if err := b.verify(ctx, adoptions); err != nil {
		return nil, err
	}
	processes, err := countKubectl(adoptions)
	if err != nil {
		return nil, err
	}
	return &Baseline{
		Plans: len(adoptions), Parallel: b.parallel, WallSeconds: wall.Seconds(), SecondsPerPlan: wall.Seconds() / float64(len(adoptions)),
		KubectlProcesses: processes, KubectlCPUSeconds: cpu,
	}, nil
}

// scriptEnv is the scripts' environment: Debian's kubectl first on the
// PATH, the management cluster's kubeconfig, and a HOME of their own for
// kubectl's discovery cache, which the scripts share.
func (b *baseline) scriptEnv(p *testenv.Program, dir string) ([]string, error) {
	bin, home := filepath.Join(dir, "bin"), filepath.Join(dir, "home")
	for _, d := range []string{bin, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	kubectl, err := filepath.Abs(b.kubectl)
	if err != nil {
		return nil, err
	}
	if err := os.Symlink(kubectl, filepath.Join(bin, "kubectl")); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, b.mgmt.Kubeconfig(p), 0o600); err != nil {
		return nil, err
	}
	return []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "HOME=" + home, "KUBECONFIG=" + kubeconfig}, nil
}

// writeScripts writes each baseline cluster's script into a directory of
// its own under dir, and keeps the first one in b.example.
func (b *baseline) writeScripts(ctx context.Context, f *fleet, dir string) ([]*adoption, error) {
	var out []*adoption
	for i := range b.plans {
		a, text, err := b.script(ctx, f, i)
		if err != nil {
			return nil, err
		}
		a.dir = filepath.Join(dir, a.cluster)
		if err := os.MkdirAll(a.dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(a.dir, "adopt.sh"), []byte(text), 0o755); err != nil {
			return nil, err
		}
		if i == 0 {
			if err := os.WriteFile(b.example, []byte(text), 0o755); err != nil {
				return nil, err
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// script reads what ferry created for cluster i of its fleet and renders
// the script of cluster i of the baseline's fleet f. It creates the
// cluster's SSH keypair in the cloud stand-in, which seed 000 makes by hand
// before it starts.
func (b *baseline) script(ctx context.Context, f *fleet, i int) (*adoption, string, error) {
	twinName, name := b.ferry.clusterName(i), f.clusterName(i)
	r, err := b.renamer(f, twinName, name)
	if err != nil {
		return nil, "", err
	}
	twin, err := readAdopted(ctx, b.mgmt.Client, b.ferry.namespace, twinName)
	if err != nil {
		return nil, "", err
	}
	backup, err := b.missingSecrets(ctx, f, name, twin, r)
	if err != nil {
		return nil, "", err
	}
	b.cloud.addKeypair(sshKeyName(name), sshPublicKey)
	text, err := adoptScript(b.mgmt.Scheme, b.mgmt.Client.RESTMapper(), r, twin, backup)
	if err != nil {
		return nil, "", err
	}
	return &adoption{cluster: name, twin: twin, r: r}, text, nil
}

// renamer maps ferry's cluster twinName to the baseline's name, with each
// node's server ID mapped to that of the node of the same number.
func (b *baseline) renamer(f *fleet, twinName, name string) (*renamer, error) {
	r := &renamer{fromNamespace: b.ferry.namespace, toNamespace: f.namespace, from: twinName, to: name, serverIDs: map[string]string{}}
	ours := b.cloud.serverIDs(name + "-")
	for node, id := range b.cloud.serverIDs(twinName + "-") {
		twin := strings.Replace(node, twinName, name, 1)
		if ours[twin] == "" {
			return nil, fmt.Errorf("baseline cluster %s: no server %s in the cloud stand-in, the twin of %s", name, twin, node)
		}
		r.serverIDs[id] = ours[twin]
	}
	return r, nil
}

// missingSecrets returns, by name, the Secrets of twin that the baseline
// cluster lacks, as its backup namespace holds them (nil when it holds
// none: the cloud credentials, which come from elsewhere).
func (b *baseline) missingSecrets(ctx context.Context, f *fleet, name string, twin *adopted, r *renamer) (map[string]*corev1.Secret, error) {
	have, err := readAdopted(ctx, b.mgmt.Client, f.namespace, name)
	if err != nil {
		return nil, err
	}
	existing := map[string]bool{}
	for _, s := range have.secrets {
		existing[s.Name] = true
	}
	out := map[string]*corev1.Secret{}
	for _, s := range twin.secrets {
		secret := r.rename(s.Name)
		if existing[secret] {
			continue
		}
		var backup corev1.Secret
		err := b.mgmt.Client.Get(ctx, client.ObjectKey{Namespace: f.namespace + "-backup", Name: secret}, &backup)
		switch {
		case err == nil:
			out[secret] = &backup
		case apierrors.IsNotFound(err):
			out[secret] = nil
		default:
			return nil, fmt.Errorf("read Secret %s-backup/%s: %w", f.namespace, secret, err)
		}
	}
	return out, nil
}

// runScripts runs the scripts, at most b.parallel at once, and returns the
// wall time from the first start to the last end and the CPU seconds of
// the scripts' processes. The first failure stops the others.
func (b *baseline) runScripts(ctx context.Context, logf func(string, ...any), env []string, adoptions []*adoption) (time.Duration, float64, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu        sync.Mutex
		cpu       float64
		done      int
		wg        sync.WaitGroup
		slots     = make(chan struct{}, b.parallel)
		start     = time.Now()
		remaining = adoptions
	)
	for len(remaining) > 0 && ctx.Err() == nil {
		a := remaining[0]
		remaining = remaining[1:]
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			seconds, err := runScript(ctx, a, env)
			mu.Lock()
			defer mu.Unlock()
			cpu += seconds
			if err != nil {
				cancel(err)
				return
			}
			if done++; done%10 == 0 || done == len(adoptions) {
				logf("kubectl baseline: %d of %d clusters adopted", done, len(adoptions))
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return 0, 0, err
	}
	return wall, cpu, nil
}

// runScript runs one adoption's script, its output in its log, and
// returns the CPU seconds of the shell and every process it started.
func runScript(ctx context.Context, a *adoption, env []string) (float64, error) {
	log, err := os.Create(a.log())
	if err != nil {
		return 0, err
	}
	defer log.Close()
	cmd := exec.CommandContext(ctx, "bash", "adopt.sh")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = a.dir, env, log, log
	// A process group of its own, so that cancelling ends the kubectl or
	// sleep the script is waiting for too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err = cmd.Run()
	var cpu float64
	if cmd.ProcessState != nil {
		// wait4 reports the script's usage with that of all the children
		// it waited for: every kubectl, sleep and subshell.
		if u, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			cpu = time.Duration(u.Utime.Nano() + u.Stime.Nano()).Seconds()
		}
	}
	if err != nil {
		return cpu, fmt.Errorf("baseline cluster %s: its script: %w; the end of its log:\n%s", a.cluster, err, tail(a.log(), 15))
	}
	return cpu, nil
}

// tail is the last n lines of a file.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// kubectlTrace matches the xtrace line of a kubectl process, in the script
// ("+ kubectl") or in a command substitution ("++ kubectl").
var kubectlTrace = regexp.MustCompile(`(?m)^\++ kubectl( |$)`)

// countKubectl counts the kubectl processes the scripts ran, from their
// traces.
func countKubectl(adoptions []*adoption) (int, error) {
	n := 0
	for _, a := range adoptions {
		data, err := os.ReadFile(a.log())
		if err != nil {
			return 0, err
		}
		n += len(kubectlTrace.FindAll(data, -1))
	}
	return n, nil
}

// verify checks that every baseline cluster was adopted, and that its
// objects are its twin's as ferry made them, so that a baseline that did
// less than ferry cannot pass for a faster one.
func (b *baseline) verify(ctx context.Context, adoptions []*adoption) error {
	var errs []error
	for _, a := range adoptions {
		got, err := readAdopted(ctx, b.mgmt.Client, a.r.toNamespace, a.cluster)
		if err == nil {
			err = errors.Join(checkAdopted(got), sameObjects(b.mgmt.Scheme, a.r, a.twin, got))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("baseline cluster %s/%s after its script: %w", a.r.toNamespace, a.cluster, err))
		}
	}
	return errors.Join(errs...)
}

// checkAdopted checks the end state of an adopted cluster: the Cluster
// unpaused, the OpenStackCluster ready, the control plane and every
// MachineDeployment unpaused with all replicas ready and updated, and
// every Machine unpaused with an OpenStackMachine as its infrastructure.
func checkAdopted(a *adopted) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	cluster, err := only(a.clusters)
	if err != nil {
		return err
	}
	osc, err := only(a.oscs)
	if err != nil {
		return err
	}
	kcp, err := only(a.kcps)
	if err != nil {
		return err
	}
	if cluster.Spec.Paused || paused(cluster) {
		bad("Cluster %s is paused", cluster.Name)
	}
	if !osc.Status.Ready {
		bad("OpenStackCluster %s is not ready", osc.Name)
	}
	if s := kcp.Status; paused(kcp) || s.Replicas != *kcp.Spec.Replicas || s.ReadyReplicas != s.Replicas || s.UpdatedReplicas != s.Replicas {
		bad("KubeadmControlPlane %s is paused or not ready: %d replicas, %d ready, %d updated", kcp.Name, s.Replicas, s.ReadyReplicas, s.UpdatedReplicas)
	}
	if len(a.mds) == 0 {
		bad("no MachineDeployment")
	}
	for _, md := range a.mds {
		if s := md.Status; paused(&md) || s.Replicas != *md.Spec.Replicas || s.ReadyReplicas != s.Replicas || s.UpdatedReplicas != s.Replicas {
			bad("MachineDeployment %s is paused or not ready: %d replicas, %d ready, %d updated", md.Name, s.Replicas, s.ReadyReplicas, s.UpdatedReplicas)
		}
	}
	for _, m := range a.machines {
		if paused(&m) {
			bad("Machine %s is paused", m.Name)
		}
		if kind := m.Spec.InfrastructureRef.Kind; kind != "OpenStackMachine" {
			bad("Machine %s's infrastructure is a %s, not an OpenStackMachine", m.Name, kind)
		}
	}
	if len(a.machines) != len(a.osms) || len(a.osms) == 0 {
		bad("%d Machines but %d OpenStackMachines", len(a.machines), len(a.osms))
	}
	return errors.Join(errs...)
}

func paused(obj client.Object) bool {
	_, ok := obj.GetAnnotations()[clusterv1.PausedAnnotation]
	return ok
}
