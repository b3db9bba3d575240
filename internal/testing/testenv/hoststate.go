package testenv

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// A real node (RealNodes) changes the machine it runs on, not only its own
// directories: a kubelet writes host-wide sysctls, containerd mounts pod
// network namespaces under /run/netns, the kubelet links container logs
// into /var/log/containers and keeps its device-plugin socket in
// /var/lib/kubelet, and the nodes' network adds namespaces, links, routes
// and cgroups. hostState is what of the machine a test run may change; a
// run records it before its first node starts, puts back what its nodes
// changed when the test ends, and fails the test when the machine then
// differs from the record.

// hostSysctls are the host-wide sysctls a kubelet sets when it starts
// (pkg/kubelet/cm's setupKernelTunables, protectKernelDefaults off) and
// IP forwarding, which a bridge plugin would set in the host's namespace.
var hostSysctls = []string{
	"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes", "net.ipv4.ip_forward",
}

// hostPaths are the fixed paths a kubelet, containerd or a CNI plugin may
// create whatever its configuration says.
var hostPaths = []string{
	"/var/lib/kubelet", "/var/log/containers", "/var/log/pods", "/var/lib/cni", "/run/containerd",
	"/run/netns", "/etc/cni", "/opt/cni", "/etc/kubernetes", "/usr/libexec/kubernetes",
}

// cgroupControllers are the cgroup v1 hierarchies a kubelet makes its
// cgroupRoot in.
var cgroupControllers = []string{"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "hugetlb", "systemd"}

// hostState is a record of the machine, one text per aspect.
type hostState map[string]string

// recordHost records the machine. cgroupRoots are the kubelets' cgroup
// roots, dirs the directories whose processes and mounts are the run's.
func recordHost(cgroupRoots []string, dirs []string) hostState {
	s := hostState{}
	for _, tool := range []string{"iptables-save", "ip6tables-save"} {
		s[tool] = iptablesRules(tool)
	}
	s["netns"] = command("ip", "netns", "list")
	s["links"] = command("ip", "-o", "link", "show")
	s["links"] = linkNames(s["links"])
	s["routes"] = command("ip", "route", "show", "table", "all")
	var b strings.Builder
	for _, m := range mountPoints() {
		b.WriteString(m + "\n")
	}
	s["mounts"] = b.String()
	b.Reset()
	for _, k := range hostSysctls {
		v, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(k, ".", "/"))
		fmt.Fprintf(&b, "%s = %s%v\n", k, strings.TrimSpace(string(v)), errText(err))
	}
	s["sysctls"] = b.String()
	b.Reset()
	for _, p := range hostPaths {
		entries, err := os.ReadDir(p)
		switch {
		case os.IsNotExist(err):
			fmt.Fprintf(&b, "%s absent\n", p)
		case err != nil:
			fmt.Fprintf(&b, "%s: %v\n", p, err)
		default:
			names := make([]string, len(entries))
			for i, e := range entries {
				names[i] = e.Name()
			}
			fmt.Fprintf(&b, "%s: %s\n", p, strings.Join(names, " "))
		}
	}
	s["paths"] = b.String()
	b.Reset()
	for _, root := range cgroupRoots {
		for _, c := range cgroupControllers {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", c, root)); err == nil {
				fmt.Fprintf(&b, "cgroup %s%s\n", c, root)
			}
		}
	}
	s["cgroups"] = b.String()
	b.Reset()
	for _, p := range processesUnder(dirs) {
		fmt.Fprintf(&b, "%s\n", p.cmdline)
	}
	s["processes"] = b.String()
	return s
}

// diff names the aspects in which s and after differ, with the lines
// that were added (+) or went (-).
func (s hostState) diff(after hostState) string {
	var out strings.Builder
	var aspects []string
	for k := range s {
		aspects = append(aspects, k)
	}
	slices.Sort(aspects)
	for _, k := range aspects {
		if s[k] == after[k] {
			continue
		}
		before, now := lines(s[k]), lines(after[k])
		fmt.Fprintf(&out, "%s:\n", k)
		for _, l := range now {
			if !slices.Contains(before, l) {
				fmt.Fprintf(&out, "  + %s\n", l)
			}
		}
		for _, l := range before {
			if !slices.Contains(now, l) {
				fmt.Fprintf(&out, "  - %s\n", l)
			}
		}
	}
	return out.String()
}

func lines(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == '\n' })
}

func errText(err error) string {
	if err != nil {
		return " (" + err.Error() + ")"
	}
	return ""
}

// command runs a program and returns its output, or the error as text.
func command(name string, args ...string) string {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// iptablesRules is iptables-save's output without comments and counters.
func iptablesRules(tool string) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(command(tool)))
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasPrefix(l, ":") { // ":CHAIN POLICY [packets:bytes]"
			if i := strings.LastIndex(l, " ["); i > 0 {
				l = l[:i]
			}
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// linkNames keeps the names of `ip -o link show`'s links, sorted.
func linkNames(out string) string {
	var names []string
	for _, l := range lines(out) {
		f := strings.Fields(l)
		if len(f) > 1 {
			n, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return strings.Join(names, "\n") + "\n"
}

// mountPoints lists the machine's mount points, sorted.
func mountPoints() []string {
	data, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, l := range lines(string(data)) {
		if f := strings.Fields(l); len(f) > 2 {
			out = append(out, f[1]+" "+f[2])
		}
	}
	slices.Sort(out)
	return out
}

type process struct {
	pid     int
	cmdline string
}

// processesUnder lists the processes whose command line names one of
// dirs (a containerd shim names its containerd's socket), sorted by
// command line.
func processesUnder(dirs []string) []process {
	return processes(func(cmdline string) bool {
		return slices.ContainsFunc(dirs, func(d string) bool { return strings.Contains(cmdline, d) })
	})
}

// processes lists the machine's processes, but this one, whose command
// line (its arguments joined by spaces) match keeps, sorted by command
// line.
func processes(match func(cmdline string) bool) []process {
	var out []process
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid == self {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(data) == 0 {
			continue
		}
		cmdline := string(bytes.ReplaceAll(bytes.TrimRight(data, "\x00"), []byte{0}, []byte{' '}))
		if match(cmdline) {
			out = append(out, process{pid, cmdline})
		}
	}
	slices.SortFunc(out, func(a, b process) int { return strings.Compare(a.cmdline, b.cmdline) })
	return out
}

// restoreHost undoes what the run changed of the machine since before:
// it kills the run's processes left over, unmounts what was mounted
// under dirs and the pod network namespaces, deletes the network
// namespaces and links that were not there, removes the cgroups, sets the
// sysctls back, deletes the iptables rules and chains that were added and
// removes the fixed paths that did not exist. Each thing it does is
// logged.
func restoreHost(logf func(string, ...any), before hostState, cgroupRoots, dirs []string) {
	for _, p := range processesUnder(dirs) {
		logf("testenv: killing leftover process %d: %s", p.pid, p.cmdline)
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	// Processes in the nodes' cgroups (containers whose shim is gone).
	for _, root := range cgroupRoots {
		_ = filepath.WalkDir(filepath.Join("/sys/fs/cgroup/pids", root), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return nil //nolint:nilerr // a cgroup gone meanwhile has no processes left
			}
			if d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(data)) {
				var pid int
				if _, err := fmt.Sscanf(f, "%d", &pid); err == nil {
					logf("testenv: killing leftover process %d in %s", pid, filepath.Dir(path))
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return nil
		})
	}
	wasMounted := lines(before["mounts"])
	mounts := mountPoints()
	slices.Reverse(mounts) // deepest first, roughly: sorted paths reversed
	for _, m := range mounts {
		if slices.Contains(wasMounted, m) {
			continue
		}
		point, _, _ := strings.Cut(m, " ")
		ours := strings.HasPrefix(point, "/run/netns/") || strings.HasPrefix(point, "/run/containerd/") || strings.HasPrefix(point, "/var/lib/kubelet/")
		for _, d := range dirs {
			ours = ours || point == d || strings.HasPrefix(point, d+"/")
		}
		if !ours {
			continue
		}
		if err := syscall.Unmount(point, 0); err != nil {
			_ = syscall.Unmount(point, syscall.MNT_DETACH)
		}
		logf("testenv: unmounted %s", point)
	}
	// `ip netns add` makes /run/netns a mount point of its own, once or
	// more.
	if !slices.ContainsFunc(wasMounted, func(m string) bool { return strings.HasPrefix(m, "/run/netns ") }) {
		for slices.ContainsFunc(mountPoints(), func(m string) bool { return strings.HasPrefix(m, "/run/netns ") }) {
			if err := syscall.Unmount("/run/netns", syscall.MNT_DETACH); err != nil {
				break
			}
			logf("testenv: unmounted /run/netns")
		}
	}
	for _, ns := range lines(command("ip", "netns", "list")) {
		name := strings.Fields(ns)[0]
		// (cni-: a pod's, which its CNI plugin deletes with the pod.)
		if (strings.HasPrefix(name, netnsPrefix) || strings.HasPrefix(name, "cni-")) && !strings.Contains(before["netns"], name) {
			logf("testenv: deleting network namespace %s: %s", name, strings.TrimSpace(command("ip", "netns", "delete", name)))
		}
	}
	for _, l := range lines(linkNames(command("ip", "-o", "link", "show"))) {
		// (A veth may have gone with its namespace meanwhile.)
		if strings.HasPrefix(l, linkPrefix) && !slices.Contains(lines(before["links"]), l) && exec.Command("ip", "link", "show", l).Run() == nil {
			logf("testenv: deleting link %s: %s", l, strings.TrimSpace(command("ip", "link", "delete", l)))
		}
	}
	for _, root := range cgroupRoots {
		for _, c := range cgroupControllers {
			top := filepath.Join("/sys/fs/cgroup", c, root)
			var dirs []string
			_ = filepath.WalkDir(top, func(path string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, path)
				}
				return nil
			})
			slices.Reverse(dirs)
			for _, d := range dirs {
				_ = os.Remove(d)
			}
		}
	}
	for _, l := range lines(before["sysctls"]) {
		k, v, _ := strings.Cut(l, " = ")
		path := "/proc/sys/" + strings.ReplaceAll(k, ".", "/")
		if now, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(now)) != v {
			logf("testenv: setting sysctl %s back from %s to %s", k, strings.TrimSpace(string(now)), v)
			_ = os.WriteFile(path, []byte(v), 0o644)
		}
	}
	for _, tool := range []string{"iptables", "ip6tables"} {
		restoreIPTables(logf, tool, before[tool+"-save"])
	}
	for _, p := range hostPaths {
		if strings.Contains(before["paths"], p+" absent\n") {
			if _, err := os.Lstat(p); err == nil {
				logf("testenv: removing %s, which was not there before", p)
				_ = os.RemoveAll(p)
			}
			continue
		}
		var had []string
		for _, l := range lines(before["paths"]) {
			if rest, ok := strings.CutPrefix(l, p+": "); ok {
				had = strings.Fields(rest)
			}
		}
		entries, _ := os.ReadDir(p)
		for _, e := range entries {
			if !slices.Contains(had, e.Name()) {
				logf("testenv: removing %s, which was not there before", filepath.Join(p, e.Name()))
				_ = os.RemoveAll(filepath.Join(p, e.Name()))
			}
		}
	}
}

// restoreIPTables deletes the rules, then the chains, that tool's tables
// have and before has not.
func restoreIPTables(logf func(string, ...any), tool, before string) {
	now := iptablesRules(tool + "-save")
	if now == before {
		return
	}
	had := lines(before)
	var table string
	var chains [][2]string
	for _, l := range lines(now) {
		switch {
		case strings.HasPrefix(l, "*"):
			table = l[1:]
		case strings.HasPrefix(l, ":") && !slices.Contains(had, l):
			chains = append(chains, [2]string{table, strings.Fields(l[1:])[0]})
		case strings.HasPrefix(l, "-A ") && !slices.Contains(had, l):
			args := append([]string{"-t", table, "-D"}, splitRule(l[3:])...)
			logf("testenv: %s: deleting rule %s: %s", tool, l, strings.TrimSpace(command(tool, args...)))
		}
	}
	for _, c := range chains {
		command(tool, "-t", c[0], "-F", c[1])
	}
	for _, c := range chains {
		logf("testenv: %s: deleting chain %s/%s: %s", tool, c[0], c[1], strings.TrimSpace(command(tool, "-t", c[0], "-X", c[1])))
	}
}

// splitRule splits an iptables-save rule into arguments, keeping quoted
// strings (comments) whole.
func splitRule(rule string) []string {
	var args []string
	var cur strings.Builder
	quoted, have := false, false
	for _, r := range rule {
		switch {
		case r == '"':
			quoted, have = !quoted, true
		case r == ' ' && !quoted:
			if have {
				args = append(args, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		args = append(args, cur.String())
	}
	return args
}

// HostRecord is a record of what of the machine real nodes may change,
// for a test that compares the machine before and after them.
type HostRecord struct{ s hostState }

// RecordHost records the machine; hold LockHost around it and the
// comparison, so that no other test's nodes come and go between them.
func RecordHost() HostRecord { return HostRecord{recordHost(nil, nil)} }

// Diff names what differs between r and after ("" when nothing does).
func (r HostRecord) Diff(after HostRecord) string { return r.s.diff(after.s) }

// ProcessStatus returns the fields of /proc/<pid>/status (Uid, Gid,
// Groups, CapEff, …) of each process whose command line (arguments
// joined by spaces) starts with prefix, and fails the test when there
// are not n: containers' processes as the kernel runs them, whatever
// their pods' specs say.
func ProcessStatus(t T, prefix string, n int) []map[string]string {
	t.Helper()
	found := processes(func(cmdline string) bool { return strings.HasPrefix(cmdline, prefix) })
	if len(found) != n {
		t.Fatalf("testenv: %d processes whose command line starts with %q; want %d: %v", len(found), prefix, n, found)
	}
	var all []map[string]string
	for _, p := range found {
		data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.pid), "status"))
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
		fields := map[string]string{}
		for _, l := range lines(string(data)) {
			if k, v, ok := strings.Cut(l, ":"); ok {
				fields[k] = strings.TrimSpace(v)
			}
		}
		all = append(all, fields)
	}
	return all
}

// hostPending is where a run that has real nodes keeps its record of the
// machine until it has put the machine back: a run that dies first (go
// test's -timeout panics and runs no cleanup) leaves it, and the next
// NewHost puts the machine back from it.
const hostPending = "/run/lock/ferry-real-nodes.pending"

// pendingRun is what hostPending holds: the record and the run's
// directory.
type pendingRun struct {
	Before hostState `json:"before"`
	Dir    string    `json:"dir"`
	PID    int       `json:"pid"`
}

// savePending writes the run's record to hostPending, a file of its own
// (/run/lock is writable by every user: what is there already is not
// written through).
func savePending(before hostState, dir string) error {
	data, err := json.Marshal(pendingRun{Before: before, Dir: dir, PID: os.Getpid()})
	if err != nil {
		return err
	}
	if err := os.Remove(hostPending); err != nil && !os.IsNotExist(err) {
		return err
	}
	f, err := os.OpenFile(hostPending, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ownPending says whether hostPending is a regular file of this user's
// that no one else may write: only then is it a record a run of ours
// left. Another local user can create it in /run/lock, and a record of
// theirs would have the restore set sysctls and delete iptables rules
// as they chose.
func ownPending() (bool, error) {
	fi, err := os.Lstat(hostPending)
	if err != nil {
		return false, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fi.Mode().IsRegular() && fi.Mode().Perm()&0o022 == 0 && int(st.Uid) == os.Geteuid(), nil
}

// restoreDeadRun puts the machine back as a run that died left it, when
// hostPending says one did (the caller holds the host's lock, so its
// writer is gone): the run's processes, mounts, namespaces, links,
// cgroups (every ferry node's: no run has nodes now), sysctls, iptables
// and paths, then the programs its test process had started that
// outlived it (orphans run from the tools' cache, and Gitea). It
// returns what it did, one line each.
func restoreDeadRun() []string {
	own, err := ownPending()
	if err != nil {
		return nil
	}
	var done []string
	logf := func(format string, args ...any) { done = append(done, fmt.Sprintf(format, args...)) }
	if !own {
		logf("testenv: %s is not a file of this user's that only it may write: not a record of ours, removed without acting on it", hostPending)
		_ = os.Remove(hostPending)
		return done
	}
	data, err := os.ReadFile(hostPending)
	if err != nil {
		return nil
	}
	var run pendingRun
	if err := json.Unmarshal(data, &run); err != nil || run.Before == nil {
		logf("testenv: %s is not a record (%v): removed", hostPending, err)
		_ = os.Remove(hostPending)
		return done
	}
	logf("testenv: the run of process %d died with real nodes (its go test timed out?); putting the machine back from its record", run.PID)
	var roots []string
	for _, c := range cgroupControllers {
		dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", c, netnsPrefix+"*"))
		for _, d := range dirs {
			if root := "/" + filepath.Base(d); !slices.Contains(roots, root) {
				roots = append(roots, root)
			}
		}
	}
	restoreHost(logf, run.Before, roots, []string{run.Dir})
	for _, p := range orphanedBackends() {
		logf("testenv: killing process %d, left by the run that died: %s", p.pid, p.cmdline)
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	_ = os.Remove(hostPending)
	return done
}

// orphanedBackends are the processes whose parent is gone (init adopted
// them) and that run a program of the tools' cache (kube-apiserver, etcd,
// the managers, Gitea): a test process that dies leaves them so, and a
// live one's are its children.
func orphanedBackends() []process {
	cache, err := os.UserCacheDir()
	if err != nil {
		return nil
	}
	tools := filepath.Join(cache, "ferry", "tools") + "/"
	var out []process
	for _, p := range processes(func(cmdline string) bool { return strings.HasPrefix(cmdline, tools) }) {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
		if err != nil {
			continue
		}
		s := string(data)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == "1" {
			out = append(out, p)
		}
	}
	return out
}
