package testenv_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestKubeRestartAPIServer proves that a restart keeps the objects (etcd
// runs on), the address and the certificates: the clients made before it
// read an object written before it, and an informer started before it
// reconnects and sees an object created after it.
func TestKubeRestartAPIServer(t *testing.T) {
	k := testenv.StartKube(t)
	ctx := t.Context()
	const ns = "default"

	before := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "before", Namespace: ns},
		Data:       map[string]string{"written": "before the restart"},
	}
	if err := k.Client.Create(ctx, before); err != nil {
		t.Fatalf("create ConfigMap: %v", err)
	}

	cs, err := kubernetes.NewForConfig(k.Config)
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	seen := make(chan string, 10)
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	informer := factory.Core().V1().ConfigMaps().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { seen <- obj.(*corev1.ConfigMap).Name },
	}); err != nil {
		t.Fatalf("add event handler: %v", err)
	}
	factory.Start(ctx.Done())
	t.Cleanup(factory.Shutdown) // runs after ctx is cancelled
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("ConfigMap informer did not sync")
	}

	k.RestartAPIServer(t)

	var got corev1.ConfigMap
	if err := k.Client.Get(ctx, client.ObjectKeyFromObject(before), &got); err != nil {
		t.Fatalf("get ConfigMap after restart: %v", err)
	}
	if got.Data["written"] != "before the restart" {
		t.Errorf("ConfigMap after restart holds %v; want what was written before", got.Data)
	}

	after := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after", Namespace: ns}}
	if err := k.Client.Create(ctx, after); err != nil {
		t.Fatalf("create ConfigMap after restart: %v", err)
	}
	// The reflector backs off between attempts while the server is down
	// (0.8s doubling), so it may take a few seconds to come back.
	timeout := time.After(time.Minute)
	for {
		select {
		case name := <-seen:
			if name == after.Name {
				return
			}
		case <-timeout:
			t.Fatal("informer started before the restart did not see the ConfigMap created after it within a minute")
		}
	}
}
