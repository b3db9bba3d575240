package testenv

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Kustomize renders the kustomization in dir as `kubectl kustomize dir`
// does, and returns its objects in order.
func Kustomize(t T, dir string) []*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resources, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("testenv: kustomize %s: %v", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range resources.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			t.Fatalf("testenv: kustomize %s: %s: %v", dir, r.CurId(), err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			t.Fatalf("testenv: kustomize %s: %s: %v", dir, r.CurId(), err)
		}
		out = append(out, u)
	}
	return out
}

// ApplyKustomization creates the objects of the kustomization in dir in
// the API server, as `kubectl apply -k dir` would on a fresh cluster
// (objects that exist are left as they are), and returns them. An object
// the API server refuses fails t with the server's reason.
func ApplyKustomization(t T, k *Kube, dir string) []*unstructured.Unstructured {
	t.Helper()
	return apply(t, k, dir, Kustomize(t, dir))
}

// ApplyKustomizationIn is ApplyKustomization with every object moved to
// namespace, for a kustomization of namespaced objects meant to be applied
// once per namespace.
func ApplyKustomizationIn(t T, k *Kube, dir, namespace string) []*unstructured.Unstructured {
	t.Helper()
	objs := Kustomize(t, dir)
	for _, o := range objs {
		o.SetNamespace(namespace)
	}
	return apply(t, k, dir, objs)
}

func apply(t T, k *Kube, dir string, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		err := k.Client.Create(context.Background(), o.DeepCopy())
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("testenv: apply %s %s/%s from %s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), dir, err)
		}
	}
	return objs
}
