package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Manager is one of the real Cluster API or CAPO controller managers, as
// `make tools` builds it, with the webhook configuration its project ships.
type Manager struct {
	// Name is the binary's name in the managers directory.
	Name string
	// Module and WebhookDir locate config/webhook/manifests.yaml.
	Module, WebhookDir string
}

// The managers StartManagers runs: CAPI's core, kubeadm bootstrap and
// KubeadmControlPlane managers, and CAPO's.
var (
	CAPIManager      = Manager{Name: "cluster-api-manager", Module: capiModule, WebhookDir: "config/webhook"}
	BootstrapManager = Manager{Name: "kubeadm-bootstrap-manager", Module: capiModule, WebhookDir: "bootstrap/kubeadm/config/webhook"}
	KCPManager       = Manager{Name: "kubeadm-control-plane-manager", Module: capiModule, WebhookDir: "controlplane/kubeadm/config/webhook"}
	CAPOManager      = Manager{Name: "capo-manager", Module: capoModule, WebhookDir: "config/webhook"}
	AllManagers      = []Manager{CAPIManager, BootstrapManager, KCPManager, CAPOManager}
)

// Managers are the controller managers running against one API server.
type Managers struct {
	// LogDir holds each manager's log, <name>.log. It is removed when the
	// test passes and kept, and named, when it fails.
	LogDir string

	mu    sync.Mutex
	procs map[string]*managerProc
	// kube, kubemark and kubeconfig are set by RunNodes, for AddNode.
	kube                 *Kube
	kubemark, kubeconfig string
}

type managerProc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
}

// LogFile is the path of a manager's log.
func (m *Managers) LogFile(name string) string { return filepath.Join(m.LogDir, name+".log") }

// StartManagers runs the real CAPI and CAPO controller managers (all of
// AllManagers unless only names some) as processes against k, each with
// its webhooks registered in k and served on a port of its own with
// certificates generated for the test, until the test ends. It returns
// once every manager answers /readyz and its webhooks are registered.
//
// Their logs go to files in LogDir. When the test fails, the cleanup names
// the files and prints the last lines of each.
func StartManagers(t T, k *Kube, only ...Manager) *Managers {
	t.Helper()
	bin, err := managersDir()
	if err != nil {
		t.Fatalf("testenv: find the CAPI and CAPO managers: %v", err)
	}
	dirs, err := moduleDirs()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if len(only) == 0 {
		only = AllManagers
	}
	logDir, err := os.MkdirTemp("", "ferry-managers-")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	ms := &Managers{LogDir: logDir, procs: map[string]*managerProc{}}
	kubeconfig := filepath.Join(logDir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, k.Kubeconfig(t), 0o600); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() { ms.stop(t) })

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	var hooks []*envtest.WebhookInstallOptions
	for _, m := range only {
		hooks = append(hooks, ms.startManager(ctx, t, m, bin, dirs[m.Module], kubeconfig))
	}
	for i, opts := range hooks {
		if err := opts.Install(k.Config); err != nil {
			t.Fatalf("testenv: register the webhooks of %s: %v", only[i].Name, err)
		}
	}
	names := make([]string, len(only))
	for i, m := range only {
		names[i] = m.Name
	}
	t.Logf("testenv: real controller managers %s ready in %s (logs in %s)", strings.Join(names, ", "), time.Since(start).Round(time.Millisecond), logDir)
	return ms
}

// startManager starts manager m from bin against the API server that
// kubeconfig reaches, serving its webhooks (from its module in moduleDir)
// on a free port, and waits until it is ready. It returns the webhooks,
// for StartManagers to register once every manager serves.
func (ms *Managers) startManager(ctx context.Context, t T, m Manager, bin, moduleDir, kubeconfig string) *envtest.WebhookInstallOptions {
	t.Helper()
	path := filepath.Join(bin, m.Name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("testenv: %s not found in %s: run `make tools` (`make test` builds it when missing)", m.Name, bin)
	}
	opts, err := webhookOptions(m, filepath.Join(moduleDir, m.WebhookDir, "manifests.yaml"))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	// envtest writes the serving certificates to a directory of its own
	// in the machine's temporary directory, always: it goes with the test.
	t.Cleanup(func() { _ = opts.Cleanup() })
	health, diagnostics := FreeAddr(t), FreeAddr(t)
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--webhook-port=" + strconv.Itoa(opts.LocalServingPort),
		"--webhook-cert-dir=" + opts.LocalServingCertDir,
		"--health-addr=" + health,
		"--diagnostics-address=" + diagnostics,
		"--insecure-diagnostics",
		"--leader-elect=false",
		// Requeues come from watches; a short resync only makes a
		// missed event cost seconds, not ten minutes.
		"--sync-period=1m",
	}
	// A manager that exits while it starts (its informers' first sync
	// timed out on a loaded machine) is started again, as its Deployment
	// would be, up to three times.
	for attempt := 1; ; attempt++ {
		p, err := ms.start(m.Name, path, args)
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
		err = waitReady(ctx, p, health)
		if err == nil {
			return opts
		}
		if !errors.Is(err, errExited) || attempt == 3 || ctx.Err() != nil {
			t.Fatalf("testenv: %s did not become ready (start %d): %v\n%s", m.Name, attempt, err, tail(p.log, 30))
		}
		t.Logf("testenv: %s exited while starting (%v; last errors: %s); starting it again", m.Name, err, lastErrors(p.log, 3))
	}
}

// errExited: a manager exited before it was ready.
var errExited = errors.New("exited")

// webhookOptions reads a manager's webhook configurations and prepares
// them for a local port and generated certificates. The projects name
// their configurations alike ("mutating-webhook-configuration"), so each
// gets the manager's name in front.
func webhookOptions(m Manager, manifest string) (*envtest.WebhookInstallOptions, error) {
	data, err := os.ReadFile(manifest)
	if err != nil {
		return nil, fmt.Errorf("webhooks of %s: %w", m.Name, err)
	}
	opts := &envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1"}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var doc struct {
			Kind string `json:"kind"`
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decode %s: %w", manifest, err)
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			return nil, fmt.Errorf("decode %s: %w", manifest, err)
		}
		switch doc.Kind {
		case "MutatingWebhookConfiguration":
			c := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := json.Unmarshal(raw, c); err != nil {
				return nil, fmt.Errorf("decode %s: %w", manifest, err)
			}
			c.Name = m.Name + "-" + c.Name
			opts.MutatingWebhooks = append(opts.MutatingWebhooks, c)
		case "ValidatingWebhookConfiguration":
			c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := json.Unmarshal(raw, c); err != nil {
				return nil, fmt.Errorf("decode %s: %w", manifest, err)
			}
			c.Name = m.Name + "-" + c.Name
			opts.ValidatingWebhooks = append(opts.ValidatingWebhooks, c)
		}
	}
	// Prepare picks the port, writes tls.crt and tls.key and points every
	// webhook at https://127.0.0.1:<port>/<path>; Install registers them.
	if err := opts.PrepWithoutInstalling(); err != nil {
		return nil, fmt.Errorf("webhooks of %s: %w", m.Name, err)
	}
	return opts, nil
}

func (ms *Managers) start(name, path string, args []string) (*managerProc, error) {
	logFile := ms.LogFile(name)
	// Appended to: a program started again keeps its earlier runs' log.
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	p := &managerProc{cmd: cmd, exited: make(chan struct{}), log: logFile}
	go func() { _ = cmd.Wait(); f.Close(); close(p.exited) }()
	ms.mu.Lock()
	ms.procs[name] = p
	ms.mu.Unlock()
	return p, nil
}

// terminate stops one program: SIGTERM, then SIGKILL after grace.
func (ms *Managers) terminate(name string, grace time.Duration) {
	ms.mu.Lock()
	p := ms.procs[name]
	delete(ms.procs, name)
	ms.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// exited names a program that exited, with its last errors, or is nil.
func (ms *Managers) exited() error {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	for name, p := range ms.procs {
		if err := p.exitErr(name); err != nil {
			return err
		}
	}
	return nil
}

// exitErr says how the program called name ended, or nil while it runs.
func (p *managerProc) exitErr(name string) error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited: %v; its last errors:\n%s", name, p.cmd.ProcessState, lastErrors(p.log, 10))
	default:
		return nil
	}
}

// exitedOne is exited for the program called name only.
func (ms *Managers) exitedOne(name string) error {
	ms.mu.Lock()
	p := ms.procs[name]
	ms.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.exitErr(name)
}

// stop ends every manager (SIGTERM, then SIGKILL after 10 s) and keeps the
// logs of a failed test.
func (ms *Managers) stop(t T) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	for _, p := range ms.procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for name, p := range ms.procs {
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if failed(t) {
			t.Logf("testenv: %s's log is %s; its last errors:\n%s", name, p.log, lastErrors(p.log, 10))
		}
	}
	if !failed(t) {
		_ = os.RemoveAll(ms.LogDir)
	}
}

// failed reports whether t failed, for a T that can tell.
func failed(t T) bool {
	f, ok := t.(interface{ Failed() bool })
	return !ok || f.Failed()
}

// waitReady polls a manager's /readyz until it answers 200, failing early
// when the process exits.
func waitReady(ctx context.Context, p *managerProc, addr string) error {
	url := "http://" + addr + "/readyz"
	client := &http.Client{Timeout: 2 * time.Second}
	var last string // the last answer, or the error of the last request
	for {
		resp, err := client.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%w: %v", errExited, p.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %s)", ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// lastErrors returns the last n lines of a manager's log that klog marks
// as errors (E...), or its last n lines when there are none.
func lastErrors(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var errs []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "E") {
			errs = append(errs, line)
		}
	}
	if len(errs) == 0 {
		return tail(path, n)
	}
	return strings.Join(errs[max(0, len(errs)-n):], "\n")
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
