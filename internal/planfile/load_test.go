package planfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/ferry-dev/ferry/internal/testing/golden"

	"github.com/ferry-dev/ferry/api/v1alpha1"
)

// examplesDir holds the example plans of the repository.
const examplesDir = "../../plans"

// Every example plan is valid, and its defaulted form is the golden file
// testdata/examples/<plan>.json: a change to a default shows up there.
func TestExamples(t *testing.T) {
	files, err := LoadPaths([]string{examplesDir})
	if err != nil {
		t.Fatalf("example plans do not validate:\n%v", err)
	}
	names, err := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 || len(files) != len(names) {
		t.Fatalf("LoadPaths returned %d plans for %d files in %s", len(files), len(names), examplesDir)
	}
	for _, f := range files {
		t.Run(filepath.Base(f.Path), func(t *testing.T) {
			got, err := json.MarshalIndent(f.Plan, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden.Check(t, filepath.Join("testdata", "examples", f.Plan.Metadata.Name+".json"), got)
		})
	}
}

// The defaults the plan format documents are applied by Decode, and a value
// the plan sets is kept.
func TestDefaults(t *testing.T) {
	load := func(t *testing.T, path string) *v1alpha1.MigrationPlan {
		t.Helper()
		files, err := LoadPaths([]string{path})
		if err != nil {
			t.Fatal(err)
		}
		return files[0].Plan
	}
	decode := func(t *testing.T, data string) *v1alpha1.MigrationPlan {
		t.Helper()
		f, err := Decode(testFile, []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		return f.Plan
	}
	deref := func(b *bool) any {
		if b == nil {
			return nil
		}
		return *b
	}
	tests := []struct {
		name string
		plan func(t *testing.T) *v1alpha1.MigrationPlan
		got  func(p *v1alpha1.MigrationPlan) any
		want any
	}{
		{
			name: "namespace",
			plan: func(t *testing.T) *v1alpha1.MigrationPlan {
				return decode(t, edit(t, replacePlan, "    namespace: tenants\n", ""))
			},
			got:  func(p *v1alpha1.MigrationPlan) any { return p.Spec.Cluster.Namespace },
			want: "default",
		},
		{
			name: "identity secret from the cluster name",
			plan: func(t *testing.T) *v1alpha1.MigrationPlan { return load(t, examplesDir+"/kamaji-quickstart.yaml") },
			got:  func(p *v1alpha1.MigrationPlan) any { return p.Spec.Target.Identity.SecretName },
			want: "kamaji-quickstart-cloud-config",
		},
		{
			name: "identity source in the cluster's namespace",
			plan: func(t *testing.T) *v1alpha1.MigrationPlan { return load(t, examplesDir+"/vsphere-workers.yaml") },
			got: func(p *v1alpha1.MigrationPlan) any {
				from := p.Spec.Target.Identity.From
				return []string{from.Namespace, from.CloudsKey, p.Spec.Target.Identity.CloudName}
			},
			want: []string{"tenants", "clouds.yaml", "openstack"},
		},
		{
			name: "kubeadm keeps its endpoint: no load balancer, no floating IP",
			plan: func(t *testing.T) *v1alpha1.MigrationPlan { return load(t, examplesDir+"/vsphere-workers.yaml") },
			got: func(p *v1alpha1.MigrationPlan) any {
				return []any{deref(p.Spec.Target.APIServer.LoadBalancer), deref(p.Spec.Target.APIServer.FloatingIP)}
			},
			want: []any{false, false},
		},
		{
			name: "kamaji gets neither",
			plan: func(t *testing.T) *v1alpha1.MigrationPlan {
				return decode(t, edit(t, kamajiPlan, "    apiServer:\n      loadBalancer: false\n      floatingIP: false\n", ""))
			},
			got: func(p *v1alpha1.MigrationPlan) any {
				return []any{deref(p.Spec.Target.APIServer.LoadBalancer), deref(p.Spec.Target.APIServer.FloatingIP)}
			},
			want: []any{false, false},
		},
		{
			name: "kamaji kubelet address order",
			plan: func(t *testing.T) *v1alpha1.MigrationPlan {
				return decode(t, edit(t, kamajiPlan, "      kubelet:\n        preferredAddressTypes: [InternalIP, ExternalIP, Hostname]\n", ""))
			},
			got:  func(p *v1alpha1.MigrationPlan) any { return p.Spec.Target.ControlPlane.Kubelet.PreferredAddressTypes },
			want: []string{"InternalIP", "ExternalIP", "Hostname"},
		},
		{
			name: "control-plane name and failure domains",
			plan: func(t *testing.T) *v1alpha1.MigrationPlan { return decode(t, replacePlan) },
			got: func(p *v1alpha1.MigrationPlan) any {
				tg := p.Spec.Target
				return []string{tg.ControlPlane.Name, tg.FailureDomain, tg.Workers[0].FailureDomain, tg.Workers[1].FailureDomain}
			},
			want: []string{"shop-control-plane", "nova", "nova", "nova"},
		},
		{
			name: "a pool's failure domain is kept",
			plan: func(t *testing.T) *v1alpha1.MigrationPlan {
				return decode(t, edit(t, replacePlan, "        replicas: 1\n", "        replicas: 1\n        failureDomain: az-2\n"))
			},
			got: func(p *v1alpha1.MigrationPlan) any {
				return []string{p.Spec.Target.Workers[0].FailureDomain, p.Spec.Target.Workers[1].FailureDomain}
			},
			want: []string{"nova", "az-2"},
		},
		{
			name: "timeouts",
			plan: func(t *testing.T) *v1alpha1.MigrationPlan {
				return decode(t, edit(t, replacePlan, "    drainTimeout: 15m\n", ""))
			},
			got: func(p *v1alpha1.MigrationPlan) any {
				return []string{p.Spec.Cutover.DrainTimeout, p.Spec.Timeouts.Wait}
			},
			want: []string{"10m", "30m"},
		},
		{
			name: "security group rules are IPv4",
			plan: func(t *testing.T) *v1alpha1.MigrationPlan { return decode(t, kamajiPlan) },
			got:  func(p *v1alpha1.MigrationPlan) any { return p.Spec.Target.SecurityGroups.AllNodesRules[1].EtherType },
			want: "IPv4",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.got(tt.plan(t))
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// minimalPlan is a valid adopt plan with the given name and cluster; the
// plan name is on line 4 and spec.cluster on line 6.
func minimalPlan(name, namespace, cluster string) string {
	return fmt.Sprintf(`apiVersion: ferry.dev/v1alpha1
kind: MigrationPlan
metadata:
  name: %s
spec:
  cluster:
    name: %s
    namespace: %s
  strategy: adopt
  target:
    identity: {}
    network: {name: net}
    sshKey: {name: key}
    controlPlane: {provider: KubeadmControlPlane, flavor: m1.medium, image: ubuntu}
`, name, cluster, namespace)
}

func TestLoadFS(t *testing.T) {
	fsys := fstest.MapFS{
		// a and b share a plan name: their status files would collide.
		"plans/a.yaml": {Data: []byte(minimalPlan("shop", "tenants", "shop"))},
		"plans/b.yaml": {Data: []byte(minimalPlan("shop", "tenants", "shop-2"))},
		// c and sub/d migrate the same cluster, found recursively.
		"plans/c.yaml":     {Data: []byte(minimalPlan("shared-1", "tenants", "shared"))},
		"plans/sub/d.yml":  {Data: []byte(minimalPlan("shared-2", "tenants", "shared"))},
		"plans/good.yaml":  {Data: []byte(minimalPlan("good", "tenants", "good"))},
		"plans/other.yaml": {Data: []byte(minimalPlan("other", "default", "shared"))},
		"plans/bad.yaml":   {Data: []byte(strings.Replace(minimalPlan("bad", "tenants", "bad"), "strategy: adopt", "strategy: move", 1))},
		"plans/README.md":  {Data: []byte("# Plans\n\nnot: [a plan\n")},
		"plans/notes.txt":  {Data: []byte("{")},
		"elsewhere/x.yaml": {Data: []byte("not a plan")},
	}
	files, err := LoadFS(fsys, "plans")

	var got []string
	for _, f := range files {
		got = append(got, f.Path)
	}
	// Clashing plans are all held back, not just the second of each pair.
	if want := []string{"plans/good.yaml", "plans/other.yaml"}; !slices.Equal(got, want) {
		t.Errorf("LoadFS returned %v, want %v", got, want)
	}
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("LoadFS error %v (%T), want planfile.Errors", err, err)
	}
	// Each file of a clash gets the error, naming the other.
	want := []string{
		`plans/a.yaml:4: metadata.name: plan "shop" is also defined in plans/b.yaml; plan names must be unique`,
		`plans/b.yaml:4: metadata.name: plan "shop" is also defined in plans/a.yaml; plan names must be unique`,
		`plans/bad.yaml:9: spec.strategy: must be one of adopt, replace, got "move"`,
		`plans/c.yaml:6: spec.cluster: cluster tenants/shared is also migrated by plans/sub/d.yml; one plan per cluster`,
		`plans/sub/d.yml:6: spec.cluster: cluster tenants/shared is also migrated by plans/c.yaml; one plan per cluster`,
	}
	if got := strings.Split(es.Error(), "\n"); !slices.Equal(got, want) {
		t.Errorf("LoadFS errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Without problems there is no error, and the plans come in path order.
	ok := fstest.MapFS{
		"plans/z.yaml": {Data: []byte(minimalPlan("z", "default", "z"))},
		"plans/a.yaml": {Data: []byte(minimalPlan("a", "default", "a"))},
	}
	files, err = LoadFS(ok, "plans")
	if err != nil || len(files) != 2 || files[0].Path != "plans/a.yaml" {
		t.Errorf("LoadFS of two good plans = %d plans, %v; want a.yaml and z.yaml, no error", len(files), err)
	}

	if _, err := LoadFS(fsys, "missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadFS of a missing directory: %v; want fs.ErrNotExist", err)
	}
}

func TestLoadPaths(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", minimalPlan("good", "default", "good"))
	bad := write("bad.yaml", strings.Replace(minimalPlan("bad", "default", "bad"), "name: net", "id: \"\"", 1))
	write("README.md", "not a plan")

	// A file named on its own is read whatever its name.
	files, err := LoadPaths([]string{good})
	if err != nil || len(files) != 1 {
		t.Errorf("LoadPaths(%s) = %d plans, %v; want 1, no error", good, len(files), err)
	}

	files, err = LoadPaths([]string{dir})
	want := bad + ":12: spec.target.network: set name or id"
	if err == nil || err.Error() != want {
		t.Errorf("LoadPaths(dir) error:\n%v\nwant:\n%s", err, want)
	}
	if len(files) != 1 || files[0].Path != good {
		t.Errorf("LoadPaths(dir) returned %d plans; want only %s", len(files), good)
	}

	if _, err := LoadPaths([]string{filepath.Join(dir, "missing")}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadPaths of a missing path: %v; want fs.ErrNotExist", err)
	}
}

// readLog is an fs.FS that records which files were read (opened or read
// whole); Stat does not count.
type readLog struct {
	fstest.MapFS
	read []string
}

func (r *readLog) Open(name string) (fs.File, error) {
	r.read = append(r.read, name)
	return r.MapFS.Open(name)
}

func (r *readLog) ReadFile(name string) ([]byte, error) {
	r.read = append(r.read, name)
	return r.MapFS.ReadFile(name)
}

func (r *readLog) Stat(name string) (fs.FileInfo, error) { return r.MapFS.Stat(name) }

func (r *readLog) ReadDir(name string) ([]fs.DirEntry, error) { return r.MapFS.ReadDir(name) }

// A plan file larger than MaxSize is refused by its size, named with it
// and the limit, and never read; the others load.
func TestLoadFSRefusesLargeFileUnread(t *testing.T) {
	big := minimalPlan("big", "default", "big") + "# " + strings.Repeat("x", MaxSize) + "\n"
	fsys := &readLog{MapFS: fstest.MapFS{
		"plans/big.yaml":  {Data: []byte(big)},
		"plans/good.yaml": {Data: []byte(minimalPlan("good", "default", "good"))},
	}}
	files, err := LoadFS(fsys, "plans")
	want := fmt.Sprintf("plans/big.yaml: file is %d bytes; a plan may be at most %d; it was not read", len(big), MaxSize)
	if err == nil || err.Error() != want {
		t.Errorf("LoadFS error:\n%v\nwant:\n%s", err, want)
	}
	if len(files) != 1 || files[0].Path != "plans/good.yaml" {
		t.Errorf("LoadFS returned %d plans; want plans/good.yaml", len(files))
	}
	if slices.Contains(fsys.read, "plans/big.yaml") {
		t.Errorf("LoadFS read plans/big.yaml (reads: %v); its size alone refuses it", fsys.read)
	}
}

// LoadFSWithin reads nothing of a directory over its limits, and says
// which limit; an oversized file, which is not read, does not count.
func TestLoadFSWithin(t *testing.T) {
	plan := minimalPlan("a", "default", "a")
	fsys := &readLog{MapFS: fstest.MapFS{
		"plans/a.yaml":   {Data: []byte(plan)},
		"plans/b.yaml":   {Data: []byte(minimalPlan("b", "default", "b"))},
		"plans/c.yaml":   {Data: []byte(minimalPlan("c", "default", "c"))},
		"plans/big.yaml": {Data: make([]byte, MaxSize+1)},
	}}
	var le *LimitError
	_, err := LoadFSWithin(fsys, "plans", Limits{Files: 3})
	if !errors.As(err, &le) || err.Error() != "plans holds 4 plan files; at most 3 are read" {
		t.Errorf("LoadFSWithin over the file limit: %v", err)
	}
	_, err = LoadFSWithin(fsys, "plans", Limits{Files: 4, Bytes: int64(2 * len(plan))})
	if !errors.As(err, &le) || le.Bytes < int64(3*len(plan)) || le.Bytes > MaxSize ||
		err.Error() != fmt.Sprintf("plans holds %d bytes of plan files; at most %d are read", le.Bytes, 2*len(plan)) {
		t.Errorf("LoadFSWithin over the byte limit: %v", err)
	}
	if len(fsys.read) != 0 {
		t.Errorf("LoadFSWithin over its limits read %v", fsys.read)
	}
	files, err := LoadFSWithin(fsys, "plans", Limits{Files: 4, Bytes: 4 * int64(len(plan))})
	var es Errors
	if len(files) != 3 || !errors.As(err, &es) || len(es) != 1 || es[0].File != "plans/big.yaml" {
		t.Errorf("LoadFSWithin within its limits = %d plans, %v; want 3 and big.yaml's size", len(files), err)
	}
}

// `reconciler validate` checks a file's size before reading it too: a
// sparse file of 150 MiB is refused without reading it.
func TestLoadPathsRefusesLargeFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "huge.yaml")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	const size = 150 << 20
	if err := errors.Join(f.Truncate(size), f.Close()); err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	_, err = LoadPaths([]string{p})
	runtime.ReadMemStats(&ms)
	want := fmt.Sprintf("%s: file is %d bytes; a plan may be at most %d; it was not read", p, size, MaxSize)
	if err == nil || err.Error() != want {
		t.Errorf("LoadPaths error:\n%v\nwant:\n%s", err, want)
	}
	if alloc := ms.TotalAlloc - before; alloc > MaxSize {
		t.Errorf("LoadPaths allocated %d bytes for a file it refuses by its size", alloc)
	}
}
