package testenv

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The modules whose CRDs and webhook configurations the test environment
// uses, read from the Go module cache at the versions go.mod pins.
const (
	mainModule = "github.com/ferry-dev/ferry"
	capiModule = "sigs.k8s.io/cluster-api"
	capoModule = "sigs.k8s.io/cluster-api-provider-openstack"
	// orcModule is not a dependency of ferry's: CAPO's manager watches its
	// Image objects, so the CRD comes from the module cache of the tools
	// module that builds CAPO (hack/tools/capi).
	orcModule = "github.com/k-orc/openstack-resource-controller"
	// capdModule holds the CRDs of Cluster API's Docker provider (CAPD),
	// the infrastructure of the clusters the replace scenario moves off:
	// its controller needs a Docker engine, so only its kinds are served.
	// It is in the graph of the tools module (hack/tools/capi), which
	// `make tools` downloads it for.
	capdModule = "sigs.k8s.io/cluster-api/test"
)

// contractLabel is the label by which Cluster API finds the version of a
// provider's CRD that implements its v1beta1 contract; a reference to a
// kind whose CRD lacks it fails in CAPI's controllers and webhooks.
const contractLabel = "cluster.x-k8s.io/v1beta1"

// crdSource is a directory of CRDs and the labels the project's own
// kustomization adds to them (config/crd/kustomization.yaml), which the
// raw files lack.
type crdSource struct {
	module, dir string
	labels      map[string]string
	// only, when set, keeps just the files named.
	only []string
}

var crdSources = []crdSource{
	// Cluster, Machine, MachineDeployment, MachineSet, ClusterClass, ...
	{module: capiModule, dir: "config/crd/bases", labels: map[string]string{"cluster.x-k8s.io/provider": "cluster-api"}},
	// KubeadmConfig, KubeadmConfigTemplate
	{module: capiModule, dir: "bootstrap/kubeadm/config/crd/bases", labels: map[string]string{contractLabel: "v1beta1"}},
	// KubeadmControlPlane, KubeadmControlPlaneTemplate
	{module: capiModule, dir: "controlplane/kubeadm/config/crd/bases", labels: map[string]string{contractLabel: "v1beta1"}},
	// OpenStackCluster, OpenStackMachine(Template), OpenStackServer, ...
	{module: capoModule, dir: "config/crd/bases", labels: map[string]string{contractLabel: "v1alpha7_v1beta1"}},
	// ORC's Image, which CAPO's manager watches.
	{module: orcModule, dir: "config/crd/bases", only: []string{"openstack.k-orc.cloud_images.yaml"}},
	// DockerCluster, DockerMachine, DockerMachineTemplate
	{module: capdModule, dir: "infrastructure/docker/config/crd/bases", labels: map[string]string{contractLabel: "v1beta1"}, only: []string{
		"infrastructure.cluster.x-k8s.io_dockerclusters.yaml", "infrastructure.cluster.x-k8s.io_dockermachines.yaml",
		"infrastructure.cluster.x-k8s.io_dockermachinetemplates.yaml"}},
}

// kamajiCRDs are the KamajiControlPlane CRDs; see crds/kamaji/README.md for
// why they live in the repository rather than the module cache.
//
//go:embed crds/kamaji/*.yaml
var kamajiCRDs embed.FS

// goListDirs runs `go list -m` in dir (a module) for the directories of
// modules in the module cache.
func goListDirs(dir string, modules ...string) (map[string]string, error) {
	cmd := exec.Command("go", append([]string{"list", "-m", "-f", "{{.Path}} {{.Dir}}"}, modules...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m in %s: %w: %s", dir, err, strings.TrimSpace(stderr.String()))
	}
	dirs := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		path, d, _ := strings.Cut(sc.Text(), " ")
		if d == "" {
			return nil, fmt.Errorf("module %s is not in the module cache: run `make tools`, which downloads it", path)
		}
		dirs[path] = d
	}
	return dirs, nil
}

// moduleDirs finds, once per process, the directories of this module, of
// the modules that ship CRDs, of ORC and of CAPD.
var moduleDirs = sync.OnceValues(func() (map[string]string, error) {
	dirs, err := goListDirs("", mainModule, capiModule, capoModule)
	if err != nil {
		return nil, err
	}
	tools, err := goListDirs(filepath.Join(dirs[mainModule], "hack", "tools", "capi"), orcModule, capdModule)
	if err != nil {
		return nil, err
	}
	maps.Copy(dirs, tools)
	return dirs, nil
})

// parsedCRDs reads every CRD once per process: those of CAPI, CAPO and ORC
// from the module cache with their kustomizations' labels, and Kamaji's.
var parsedCRDs = sync.OnceValues(func() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dirs, err := moduleDirs()
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, src := range crdSources {
		fsys := os.DirFS(filepath.Join(dirs[src.module], src.dir))
		got, err := decodeCRDs(fsys, src.only)
		if err != nil {
			return nil, fmt.Errorf("CRDs of %s in %s: %w", src.module, src.dir, err)
		}
		for _, crd := range got {
			if crd.Labels == nil {
				crd.Labels = map[string]string{}
			}
			maps.Copy(crd.Labels, src.labels)
		}
		crds = append(crds, got...)
	}
	kamaji, err := fs.Sub(kamajiCRDs, "crds/kamaji")
	if err != nil {
		return nil, err
	}
	got, err := decodeCRDs(kamaji, nil)
	if err != nil {
		return nil, fmt.Errorf("CRDs in crds/kamaji: %w", err)
	}
	// The provider's kustomization labels its CRDs with the contract it
	// implements, as CAPI's do: without it the Cluster controller cannot
	// read the control plane's status.
	for _, crd := range got {
		crd.Labels = map[string]string{contractLabel: "v1alpha1"}
	}
	return append(crds, got...), nil
})

// decodeCRDs decodes the CRDs of the .yaml files in fsys (only those named
// in only, when set).
func decodeCRDs(fsys fs.FS, only []string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names := only
	if len(names) == 0 {
		files, err := fs.ReadDir(fsys, ".")
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if strings.HasSuffix(f.Name(), ".yaml") {
				names = append(names, f.Name())
			}
		}
	}
	if len(names) == 0 {
		return nil, errors.New("no CRD files")
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := dec.Decode(crd); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("decode %s: %w", name, err)
			}
			if crd.Name != "" { // skip empty documents
				crds = append(crds, crd)
			}
		}
	}
	return crds, nil
}

// toolsDir returns the directory holding kube-apiserver and etcd:
// $KUBEBUILDER_ASSETS when set (the Makefile sets it), otherwise the
// directory that hack/tools.sh builds into.
func toolsDir() (string, error) {
	return toolsScriptDir("KUBEBUILDER_ASSETS", "--dir")
}

// managersDir returns the directory holding the CAPI and CAPO managers:
// $FERRY_MANAGERS_DIR when set (the Makefile sets it), otherwise the
// directory that hack/tools.sh builds into.
func managersDir() (string, error) {
	return toolsScriptDir("FERRY_MANAGERS_DIR", "--managers-dir")
}

func toolsScriptDir(env, flag string) (string, error) {
	if dir := os.Getenv(env); dir != "" {
		return dir, nil
	}
	dirs, err := moduleDirs()
	if err != nil {
		return "", err
	}
	out, err := exec.Command("bash", filepath.Join(dirs[mainModule], "hack", "tools.sh"), flag).Output()
	if err != nil {
		return "", fmt.Errorf("hack/tools.sh %s: %w", flag, err)
	}
	return strings.TrimSpace(string(out)), nil
}
