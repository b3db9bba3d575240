//go:build openstack

package main

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferry-dev/ferry/internal/openstack/ostest"
	"github.com/ferry-dev/ferry/internal/testenv"
)

// adoptableCluster sets up a seed 000 cluster whose nodes run on servers of
// the local OpenStack: the fixture's project, a management and a workload
// API server with the orphaned cluster, and its identity Secret filled with
// the project's clouds.yaml. It returns the control-plane node names too.
func adoptableCluster(t *testing.T) (f *ostest.Fixture, mgmt, workload *testenv.Kube, cp []string) {
	t.Helper()
	f = ostest.New(t, "capi-quickstart")
	var workers []string
	for name := range f.Servers {
		if strings.Contains(name, "control-plane") {
			cp = append(cp, name)
		} else {
			workers = append(workers, name)
		}
	}
	mgmt = testenv.StartKube(t)
	workload = testenv.StartKube(t)
	testenv.Orphan(t, mgmt, workload, testenv.OrphanedCluster{
		Name: "capi-quickstart", Namespace: "default",
		ControlPlaneNodes: cp, WorkerNodes: workers, KubeletVersion: "v1.31.4",
	})
	mustCreate(t, mgmt, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "capi-quickstart-cloud-config"},
		Data:       map[string][]byte{"clouds.yaml": f.Creds.CloudsYAML},
	})
	return f, mgmt, workload, cp
}

// adoptPlan is a seed 000 adopt plan on the fixture's cloud, approved up
// to approve; extra is appended to spec (e.g. a manifests section).
func adoptPlan(f *ostest.Fixture, approve, extra string) string {
	return `apiVersion: ferry.dev/v1alpha1
kind: MigrationPlan
metadata:
  name: capi-quickstart
spec:
  cluster: {name: capi-quickstart, namespace: default}
  strategy: adopt
  target:
    identity: {cloudName: openstack}
    externalNetwork: {name: ` + f.ExternalNetwork + `}
    network: {name: ` + f.Network + `}
    sshKey: {name: capi-key-` + f.Suffix + `, publicKey: "` + f.PublicKey + `"}
    controlPlane: {provider: KubeadmControlPlane, flavor: ` + f.Flavor + `, image: ` + f.Image + `}
    workers:
      - {name: md-0, flavor: ` + f.Flavor + `, image: ` + f.Image + `, replicas: 2}
` + extra + `  approve: ` + approve + `
`
}
