package workload

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/observed"
	"github.com/ferry-dev/ferry/internal/step"
)

// testWorkloadDeleteManifest: ferry's apply marks the objects it creates,
// and a rollback's delete of the manifest removes those and leaves the
// ones that were there before; a second delete finds nothing to do.
func testWorkloadDeleteManifest(t *testing.T, env *testEnv) {
	ctx := context.Background()
	c := env.wl.Client
	const path = "manifests/rollback.yaml"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rollback"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "rollback", Name: "there-before"}}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // a second apply keeps the marks as they are
		if _, err := env.exec.Execute(ctx, stepEvent(step.Apply, step.Target{Kind: step.Manifest, Name: path}, nil)); err != nil {
			t.Fatal(err)
		}
	}
	marked := func(name string) (bool, error) {
		var cm corev1.ConfigMap
		err := c.Get(ctx, client.ObjectKey{Namespace: "rollback", Name: name}, &cm)
		return cm.Annotations[observed.LabelCreatedBy] == "c1", err
	}
	if m, err := marked("new"); err != nil || !m {
		t.Fatalf("ConfigMap new after apply: marked %t, %v; want ferry's mark", m, err)
	}
	if m, err := marked("there-before"); err != nil || m {
		t.Fatalf("ConfigMap there-before after apply: marked %t, %v; want no mark", m, err)
	}
	rep, err := env.exec.Execute(ctx, stepEvent(step.Delete, step.Target{Kind: step.Manifest, Name: path}, nil))
	if err != nil || !strings.Contains(rep.Message, "deleted 1 objects") || !strings.Contains(rep.Message, "2 that were there before left") {
		t.Fatalf("delete manifest: %q, %v", rep.Message, err)
	}
	if _, err := marked("new"); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap new after the delete: %v, want it gone", err)
	}
	if _, err := marked("there-before"); err != nil {
		t.Errorf("ConfigMap there-before after the delete: %v, want it kept", err)
	}
	if rep, err = env.exec.Execute(ctx, stepEvent(step.Delete, step.Target{Kind: step.Manifest, Name: path}, nil)); err != nil || !strings.Contains(rep.Message, "deleted 0 objects") {
		t.Errorf("delete again: %q, %v", rep.Message, err)
	}
}
