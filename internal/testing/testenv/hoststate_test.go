package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestRestoreHost plants on the machine one of each thing a real node can
// leave behind (an iptables chain and the rules that jump to it, a sysctl
// changed, a link, a network namespace, a mount under the run's
// directory, a fixed path that was not there, a process of the run), and
// checks that the record sees each one and that restoreHost puts the
// machine back to the record: the nodes' own runs exercise only the kinds
// their kubelets happen to leave.
func TestRestoreHost(t *testing.T) {
	release := LockHost(t)
	defer release()
	dir := t.TempDir()
	before := recordHost(nil, []string{dir})
	if !strings.Contains(before["paths"], "/var/lib/kubelet absent") {
		t.Fatalf("/var/lib/kubelet exists before the test; this test plants it")
	}
	// Put back even when the test stops half-way.
	t.Cleanup(func() { restoreHost(t.Logf, before, nil, []string{dir}) })
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
		}
	}
	run("iptables", "-t", "filter", "-N", "FERRY-TEST-LEAK")
	run("iptables", "-t", "filter", "-A", "FERRY-TEST-LEAK", "-s", "198.51.100.254/32", "-m", "comment", "--comment", "ferry test leak", "-j", "DROP")
	run("iptables", "-t", "filter", "-A", "INPUT", "-s", "198.51.100.254/32", "-j", "FERRY-TEST-LEAK")
	panicPath := "/proc/sys/kernel/panic"
	was, err := os.ReadFile(panicPath)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(was)))
	if err := os.WriteFile(panicPath, []byte(strconv.Itoa(n+7)), 0o644); err != nil {
		t.Fatal(err)
	}
	run("ip", "link", "add", linkPrefix+"leak0", "type", "bridge")
	run("ip", "netns", "add", netnsPrefix+"leak")
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll("/var/lib/kubelet/device-plugins", 0o755); err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("sh", "-c", "sleep 300; : "+dir)
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleeper.Wait() }()

	planted := before.diff(recordHost(nil, []string{dir}))
	for _, aspect := range []string{"iptables-save", "sysctls", "links", "netns", "mounts", "paths", "processes"} {
		if !strings.Contains(planted, aspect+":\n") {
			t.Errorf("the record does not see what was planted in %s; the difference:\n%s", aspect, planted)
		}
	}
	restoreHost(t.Logf, before, nil, []string{dir})
	if diff := before.diff(recordHost(nil, []string{dir})); diff != "" {
		t.Errorf("after restoreHost the machine still differs from the record:\n%s", diff)
	}
}

// TestNetworkKeepsItsAddress joins a port with the lowest MAC address
// there is to a network's bridge: the bridge keeps its own, so the nodes
// that resolved the host address before it joined still reach the host.
// (A bridge without an address of its own takes its lowest port's: the
// nodes that had resolved the old one lost the host for about 45
// seconds, until their neighbour entry expired.)
func TestNetworkKeepsItsAddress(t *testing.T) {
	h := NewHost(t)
	n := h.Network("mac")
	mac := func() string {
		t.Helper()
		out, err := os.ReadFile("/sys/class/net/" + n.bridge() + "/address")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	was := mac()
	port := linkPrefix + "lowmac"
	for _, args := range [][]string{
		{"link", "add", port, "address", "00:00:00:00:00:01", "type", "veth", "peer", "name", port + "p"},
		{"link", "set", port, "master", n.bridge(), "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", port).Run() })
	if now := mac(); now != was {
		t.Errorf("bridge %s: MAC address %s after a port with 00:00:00:00:00:01 joined; want %s, as before", n.bridge(), now, was)
	}
}

// TestRestoreDeadRun plays a run that died with real nodes (go test's
// timeout panics without cleaning up): its record is in hostPending and
// it left a link and a network namespace. restoreDeadRun puts the
// machine back as the record has it, says so, and removes the record.
func TestRestoreDeadRun(t *testing.T) {
	release := LockHost(t)
	defer release()
	dir := t.TempDir()
	before := recordHost(nil, []string{dir})
	t.Cleanup(func() { restoreHost(t.Logf, before, nil, []string{dir}); _ = os.Remove(hostPending) })
	if err := savePending(before, dir); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"link", "add", linkPrefix + "dead0", "type", "bridge"}, {"netns", "add", netnsPrefix + "dead"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	done := restoreDeadRun()
	if len(done) == 0 || !strings.Contains(done[0], "died with real nodes") {
		t.Errorf("restoreDeadRun said %q; want it to say a run died", done)
	}
	if diff := before.diff(recordHost(nil, []string{dir})); diff != "" {
		t.Errorf("after restoreDeadRun the machine differs from the dead run's record:\n%s", diff)
	}
	if _, err := os.Stat(hostPending); !os.IsNotExist(err) {
		t.Errorf("%s after restoreDeadRun: %v; want it removed", hostPending, err)
	}
	if again := restoreDeadRun(); again != nil {
		t.Errorf("a second restoreDeadRun did %q; want nothing", again)
	}
}

// TestRestoreDeadRunRefusesAnotherUsersRecord: /run/lock is writable by
// every local user; a record there that another user owns (here one with
// an empty iptables record, which would have the restore delete every
// rule) is removed without being acted on, and the machine is unchanged.
func TestRestoreDeadRunRefusesAnotherUsersRecord(t *testing.T) {
	release := LockHost(t)
	defer release()
	before := recordHost(nil, nil)
	t.Cleanup(func() { _ = os.Remove(hostPending) })
	forged := hostState{}
	for k := range before {
		forged[k] = ""
	}
	if err := savePending(forged, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(hostPending, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	done := restoreDeadRun()
	if len(done) != 1 || !strings.Contains(done[0], "not a record of ours") {
		t.Errorf("restoreDeadRun said %q; want it to refuse the record", done)
	}
	if diff := before.diff(recordHost(nil, nil)); diff != "" {
		t.Errorf("restoreDeadRun acted on another user's record; the machine changed:\n%s", diff)
	}
	if _, err := os.Stat(hostPending); !os.IsNotExist(err) {
		t.Errorf("%s after restoreDeadRun: %v; want it removed", hostPending, err)
	}
}
