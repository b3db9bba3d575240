package ostest

import (
	"context"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferry-dev/ferry/internal/testenv"
)

// Adoptable is a seed 000 cluster ready to be adopted onto the local
// OpenStack: a fixture in the cloud, a management API server with the
// orphaned cluster (Secrets kept, CAPI objects gone) and its identity
// Secret holding the project's clouds.yaml, and a workload API server,
// running with the cluster's authorities, whose Nodes are named like the
// fixture's servers.
type Adoptable struct {
	*Fixture
	// Name is the cluster's name, in namespace default.
	Name           string
	Mgmt, Workload *testenv.Kube
	// PKI holds the authorities the workload API server runs with and the
	// cluster's Secrets hold.
	PKI *testenv.PKI
	// ControlPlane and Workers are the node (and server) names, sorted.
	ControlPlane, Workers []string
}

// NewAdoptable builds an Adoptable cluster named name; everything goes
// when t ends.
func NewAdoptable(t testenv.T, name string) *Adoptable {
	t.Helper()
	a := &Adoptable{Fixture: New(t, name), Name: name}
	for node := range a.Servers {
		if strings.Contains(node, "control-plane") {
			a.ControlPlane = append(a.ControlPlane, node)
		} else {
			a.Workers = append(a.Workers, node)
		}
	}
	sort.Strings(a.ControlPlane)
	sort.Strings(a.Workers)
	a.PKI = testenv.NewPKI(t, name)
	a.Mgmt = testenv.StartKube(t)
	a.Workload = testenv.StartKubeWith(t, a.PKI)
	testenv.Orphan(t, a.Mgmt, a.Workload, testenv.OrphanedCluster{
		Name: name, Namespace: "default",
		ControlPlaneNodes: a.ControlPlane, WorkerNodes: a.Workers, KubeletVersion: "v1.31.4",
		PKI: a.PKI,
	})
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-cloud-config"},
		Data:       map[string][]byte{"clouds.yaml": a.Creds.CloudsYAML},
	}
	if err := a.Mgmt.Client.Create(context.Background(), secret); err != nil {
		t.Fatalf("ostest: create the identity Secret: %v", err)
	}
	return a
}

// Plan is an adopt plan for the cluster on the fixture's cloud (its
// networks, flavor, image and a fresh SSH key), approved up to approve
// (`""` for nothing); extra is appended to spec, e.g. a manifests section.
func (a *Adoptable) Plan(approve, extra string) string {
	return `apiVersion: ferry.dev/v1alpha1
kind: MigrationPlan
metadata:
  name: ` + a.Name + `
spec:
  cluster: {name: ` + a.Name + `, namespace: default}
  strategy: adopt
  target:
    identity: {cloudName: openstack}
    externalNetwork: {name: ` + a.ExternalNetwork + `}
    network: {name: ` + a.Network + `}
    sshKey: {name: capi-key-` + a.Suffix + `, publicKey: "` + a.PublicKey + `"}
    controlPlane: {provider: KubeadmControlPlane, flavor: ` + a.Flavor + `, image: ` + a.Image + `}
    workers:
      - {name: md-0, flavor: ` + a.Flavor + `, image: ` + a.Image + `, replicas: ` + strconv.Itoa(len(a.Workers)) + `}
` + extra + `  approve: ` + approve + `
`
}
