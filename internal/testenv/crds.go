package testenv

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The modules whose CRDs the API server is started with, read from the Go
// module cache at the versions go.mod pins, and the directories inside each.
const (
	mainModule = "github.com/ferry-dev/ferry"
	capiModule = "sigs.k8s.io/cluster-api"
	capoModule = "sigs.k8s.io/cluster-api-provider-openstack"
)

var crdDirs = map[string][]string{
	capiModule: {
		"config/crd/bases",                      // Cluster, Machine, MachineDeployment, MachineSet, ...
		"bootstrap/kubeadm/config/crd/bases",    // KubeadmConfig, KubeadmConfigTemplate
		"controlplane/kubeadm/config/crd/bases", // KubeadmControlPlane
	},
	capoModule: {"config/crd/bases"}, // OpenStackCluster, OpenStackMachine(Template), OpenStackServer, ...
}

// kamajiCRDs are the KamajiControlPlane CRDs; see crds/kamaji/README.md for
// why they live in the repository rather than the module cache.
//
//go:embed crds/kamaji/*.yaml
var kamajiCRDs embed.FS

// moduleDirs runs `go list -m` once per process for the directories of this
// module and of the modules that ship CRDs.
var moduleDirs = sync.OnceValues(func() (map[string]string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Path}} {{.Dir}}", mainModule, capiModule, capoModule)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	dirs := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		path, dir, _ := strings.Cut(sc.Text(), " ")
		if dir == "" {
			return nil, fmt.Errorf("module %s is not in the module cache: run `go mod download %s`", path, path)
		}
		dirs[path] = dir
	}
	return dirs, nil
})

// crdPaths returns the CRD directories of CAPI and CAPO in the module cache.
func crdPaths() ([]string, error) {
	dirs, err := moduleDirs()
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, mod := range []string{capiModule, capoModule} {
		for _, sub := range crdDirs[mod] {
			p := filepath.Join(dirs[mod], sub)
			if _, err := os.Stat(p); err != nil {
				return nil, fmt.Errorf("CRDs of %s: %w", mod, err)
			}
			paths = append(paths, p)
		}
	}
	return paths, nil
}

// parsedKamajiCRDs decodes the embedded Kamaji CRDs once per process.
var parsedKamajiCRDs = sync.OnceValues(func() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := kamajiCRDs.ReadDir("crds/kamaji")
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), ".yaml") {
			continue
		}
		data, err := kamajiCRDs.ReadFile("crds/kamaji/" + f.Name())
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := dec.Decode(crd); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("decode crds/kamaji/%s: %w", f.Name(), err)
			}
			if crd.Name != "" { // skip empty documents
				crds = append(crds, crd)
			}
		}
	}
	return crds, nil
})

// kamajiCRDCopies returns fresh copies of the Kamaji CRDs: envtest writes
// server-set fields into the objects it creates, and each API server needs
// objects that were never created anywhere.
func kamajiCRDCopies() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	crds, err := parsedKamajiCRDs()
	if err != nil {
		return nil, err
	}
	copies := make([]*apiextensionsv1.CustomResourceDefinition, len(crds))
	for i, crd := range crds {
		copies[i] = crd.DeepCopy()
	}
	return copies, nil
}

// toolsDir returns the directory holding kube-apiserver and etcd:
// $KUBEBUILDER_ASSETS when set (the Makefile sets it), otherwise the
// directory that hack/tools.sh builds into.
func toolsDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	dirs, err := moduleDirs()
	if err != nil {
		return "", err
	}
	out, err := exec.Command("bash", filepath.Join(dirs[mainModule], "hack", "tools.sh"), "--dir").Output()
	if err != nil {
		return "", fmt.Errorf("hack/tools.sh --dir: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}
