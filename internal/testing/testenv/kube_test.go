package testenv_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/bootstrap/kubeadm/api/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/controlplane/kubeadm/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestKube proves the API server is real: CAPI and CAPO objects are stored and
// read back, the status subresource is separate from spec, every CRD a
// migration touches is served, and CRD validation (OpenAPI schema and CEL
// rules) rejects bad objects with the offending field named.
func TestKube(t *testing.T) {
	k := testenv.StartKube(t)
	c := k.Client
	ctx := t.Context()
	const ns = "smoke"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}

	t.Run("CAPI Cluster and CAPO OpenStackCluster round-trip", func(t *testing.T) {
		osc := &infrav1.OpenStackCluster{
			ObjectMeta: metav1.ObjectMeta{Name: "capi-quickstart", Namespace: ns},
			Spec: infrav1.OpenStackClusterSpec{
				IdentityRef:     infrav1.OpenStackIdentityReference{Name: "capi-quickstart-cloud-config", CloudName: "openstack"},
				ExternalNetwork: &infrav1.NetworkParam{Filter: &infrav1.NetworkFilter{Name: "public"}},
			},
		}
		cluster := &clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: "capi-quickstart", Namespace: ns},
			Spec: clusterv1.ClusterSpec{
				Paused:               true,
				ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "10.0.0.10", Port: 6443},
				InfrastructureRef: &corev1.ObjectReference{
					APIVersion: infrav1.SchemeGroupVersion.String(), Kind: "OpenStackCluster", Name: osc.Name,
				},
			},
		}
		for _, obj := range []client.Object{osc, cluster} {
			if err := c.Create(ctx, obj); err != nil {
				t.Fatalf("create %T: %v", obj, err)
			}
		}

		var gotCluster clusterv1.Cluster
		if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), &gotCluster); err != nil {
			t.Fatalf("get Cluster: %v", err)
		}
		if gotCluster.UID == "" || gotCluster.Generation != 1 {
			t.Errorf("Cluster has uid %q and generation %d; want server-set uid and generation 1", gotCluster.UID, gotCluster.Generation)
		}
		if !gotCluster.Spec.Paused || gotCluster.Spec.InfrastructureRef.Kind != "OpenStackCluster" || gotCluster.Spec.ControlPlaneEndpoint.Port != 6443 {
			t.Errorf("Cluster spec read back as %+v", gotCluster.Spec)
		}

		// Status is a subresource: a plain update must not change it, a status
		// update must. The stand-in controllers of later tests rely on this.
		var got infrav1.OpenStackCluster
		if err := c.Get(ctx, client.ObjectKeyFromObject(osc), &got); err != nil {
			t.Fatalf("get OpenStackCluster: %v", err)
		}
		got.Status.Ready = true
		if err := c.Update(ctx, &got); err != nil {
			t.Fatalf("update OpenStackCluster: %v", err)
		}
		if got.Status.Ready {
			t.Error("a plain update set status.ready; want it ignored (status subresource)")
		}
		got.Status.Ready = true
		if err := c.Status().Update(ctx, &got); err != nil {
			t.Fatalf("update OpenStackCluster status: %v", err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(osc), &got); err != nil {
			t.Fatalf("get OpenStackCluster: %v", err)
		}
		if !got.Status.Ready || got.Spec.ExternalNetwork.Filter.Name != "public" {
			t.Errorf("OpenStackCluster read back with ready=%v externalNetwork=%+v", got.Status.Ready, got.Spec.ExternalNetwork)
		}
	})

	t.Run("every CRD of a migration is served", func(t *testing.T) {
		for _, list := range []client.ObjectList{
			&clusterv1.MachineList{}, &clusterv1.MachineSetList{}, &clusterv1.MachineDeploymentList{},
			&bootstrapv1.KubeadmConfigList{}, &bootstrapv1.KubeadmConfigTemplateList{},
			&controlplanev1.KubeadmControlPlaneList{},
			&infrav1.OpenStackMachineList{}, &infrav1.OpenStackMachineTemplateList{},
		} {
			if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
				t.Errorf("list %T: %v", list, err)
			}
		}
	})

	// Objects are written as YAML and sent unstructured, so that the cases can
	// hold what a typed client could not send (wrong types, missing fields).
	for _, tc := range []struct {
		name    string
		object  string
		wantErr string // empty: the object must be accepted
	}{{
		name: "OpenStackCluster without identityRef",
		object: `
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: OpenStackCluster
metadata: {name: no-identity}
spec: {externalNetwork: {filter: {name: public}}}`,
		wantErr: "spec.identityRef: Required value",
	}, {
		name: "OpenStackCluster with a bastion and no bastion spec (CEL rule)",
		object: `
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: OpenStackCluster
metadata: {name: bastion-without-spec}
spec:
  identityRef: {name: cloud-config, cloudName: openstack}
  bastion: {enabled: true}`,
		wantErr: "spec is required if bastion is enabled",
	}, {
		name: "Cluster with a port that is not a number",
		object: `
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata: {name: bad-port}
spec: {controlPlaneEndpoint: {host: 10.0.0.10, port: "six"}}`,
		wantErr: "spec.controlPlaneEndpoint.port",
	}, {
		name: "KamajiControlPlane without version",
		object: `
apiVersion: controlplane.cluster.x-k8s.io/v1alpha1
kind: KamajiControlPlane
metadata: {name: no-version}
spec: {replicas: 1, dataStoreName: default}`,
		wantErr: "spec.version: Required value",
	}, {
		name: "KamajiControlPlane as in seed 004",
		object: `
apiVersion: controlplane.cluster.x-k8s.io/v1alpha1
kind: KamajiControlPlane
metadata: {name: kamaji-quickstart-control-plane}
spec:
  replicas: 1
  version: 1.28.10
  dataStoreName: default
  kubelet: {preferredAddressTypes: [InternalIP, ExternalIP, Hostname]}
  network: {serviceType: LoadBalancer}`,
	}, {
		name: "OpenStackServer without a flavor (CEL rule)",
		object: `
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: OpenStackServer
metadata: {name: vpn-gateway}
spec:
  identityRef: {name: cloud-config, cloudName: openstack}
  image: {filter: {name: ubuntu-2204}}
  ports: [{network: {filter: {name: k8s-net}}}]
  sshKeyName: capi-key`,
		wantErr: "at least one of flavor or flavorID must be set",
	}, {
		name: "OpenStackServer for a VPN gateway (seed 002)",
		object: `
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: OpenStackServer
metadata: {name: vpn-gateway}
spec:
  identityRef: {name: cloud-config, cloudName: openstack}
  flavor: m1.small
  image: {filter: {name: ubuntu-2204}}
  ports: [{network: {filter: {name: k8s-net}}}]
  sshKeyName: capi-key`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(tc.object), &obj.Object); err != nil {
				t.Fatalf("test case YAML: %v", err)
			}
			obj.SetNamespace(ns)
			err := c.Create(ctx, obj)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("create %s: %v; want it accepted", obj.GetKind(), err)
			case tc.wantErr == "":
				return
			case err == nil:
				t.Fatalf("create %s succeeded; want it rejected with %q", obj.GetKind(), tc.wantErr)
			case !apierrors.IsInvalid(err):
				t.Fatalf("create %s: %v; want an Invalid error", obj.GetKind(), err)
			case !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("create %s: %v; want the error to contain %q", obj.GetKind(), err, tc.wantErr)
			}
		})
	}
}
