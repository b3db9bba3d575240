//go:build openstack

package observer

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferry-dev/ferry/api/v1alpha1"
	"github.com/ferry-dev/ferry/internal/testing/ostest"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestObserveOpenStack reads a plan's cloud from the local OpenStack with
// the credentials of a Secret in a real API server.
func TestObserveOpenStack(t *testing.T) {
	f := ostest.New(t, "c1")
	k := testenv.StartKube(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The identity Secret is not filled yet: the source Secret is read.
	if err := k.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "creds"}}); err != nil {
		t.Fatal(err)
	}
	if err := k.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "creds", Name: "os"},
		Data: map[string][]byte{"my-clouds": f.Creds.CloudsYAML}}); err != nil {
		t.Fatal(err)
	}
	p := &v1alpha1.MigrationPlan{Metadata: v1alpha1.Metadata{Name: "c1"}, Spec: v1alpha1.Spec{
		Cluster:  v1alpha1.ClusterRef{Name: "c1", Namespace: "default"},
		Strategy: v1alpha1.StrategyReplace,
		Target: v1alpha1.Target{
			Identity:        v1alpha1.Identity{From: &v1alpha1.SecretSource{Namespace: "creds", Name: "os", CloudsKey: "my-clouds"}},
			Network:         v1alpha1.ResourceRef{Name: f.Network},
			ExternalNetwork: &v1alpha1.ResourceRef{Name: f.ExternalNetwork},
			ControlPlane:    v1alpha1.ControlPlane{Provider: v1alpha1.ProviderKamaji},
			Workers: []v1alpha1.WorkerPool{
				{Name: "a", Flavor: f.Flavor, Image: f.Image, Replicas: 20},
				{Name: "b", Flavor: f.Flavor, Image: "no-such-image-" + f.Suffix, Replicas: 1},
			},
		},
	}}
	v1alpha1.Default(p)
	o := &OpenStack{Client: k.Client}
	cloud, err := o.ObserveCloud(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"network/" + f.Network:                 f.NetworkID,
		"externalNetwork/" + f.ExternalNetwork: f.ExternalNetworkID,
		"flavor/" + f.Flavor:                   f.FlavorID,
		"image/" + f.Image:                     f.ImageID,
	} {
		if got := cloud.Resolved[key]; got.ID != want {
			t.Errorf("Resolved[%s] = %+v, want ID %s", key, got, want)
		}
	}
	if r := cloud.Resolved["image/no-such-image-"+f.Suffix]; r.ID != "" || !strings.Contains(r.Error, `no image named "no-such-image-`+f.Suffix+`"`) {
		t.Errorf("missing image resolved to %+v; want an error naming it", r)
	}
	for name, id := range f.Servers {
		if cloud.Servers[name] != id {
			t.Errorf("Servers[%s] = %q, want %s", name, cloud.Servers[name], id)
		}
	}
	// 20 + 1 machines of one core against a quota of 10 instances and 20
	// cores, with the fixture's 3 servers running.
	if want := "instances: need 21, 7 of 10 left; cores: need 21, 17 of 20 left"; cloud.QuotaShortfall != want {
		t.Errorf("QuotaShortfall = %q, want %q", cloud.QuotaShortfall, want)
	}

	// A wrong password is reported, with no password in the message; the
	// observation is cached until the plan is forgotten.
	if err := k.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c1-cloud-config"},
		Data: map[string][]byte{"clouds.yaml": f.CloudsYAML("wrong-password-value")}}); err != nil {
		t.Fatal(err)
	}
	if again, err := o.ObserveCloud(ctx, p); err != nil || !reflect.DeepEqual(again, cloud) {
		t.Errorf("second observation within MaxAge: %v; want the cached one", err)
	}
	o.Forget(p.Metadata.Name)
	_, err = o.ObserveCloud(ctx, p)
	if err == nil || !strings.Contains(err.Error(), "credentials refused") || strings.Contains(err.Error(), "wrong-password-value") {
		t.Errorf("ObserveCloud with a wrong password: %v", err)
	}
}
