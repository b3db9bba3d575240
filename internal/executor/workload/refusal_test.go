package workload

import (
	"errors"
	"log/slog"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// TestOnlyRefusals runs the real drain helper's pod list (a unit test:
// client-go's fake clientset stands for the API server, whose refusal to
// answer is what is tested). A pod without a controller is a refusal,
// which makes the drain step terminal; a DaemonSet's pod whose DaemonSet
// cannot be read (make chaos restarts the workload API server mid-drain)
// is not, and neither is a list holding both: the step runs again.
func TestOnlyRefusals(t *testing.T) {
	onNode := func(name string, owner *metav1.OwnerReference) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name}, Spec: corev1.PodSpec{NodeName: "n1"}}
		if owner != nil {
			p.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		return p
	}
	daemon := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "kube-proxy", UID: "ds", Controller: ptr.To(true)}
	for _, c := range []struct {
		name    string
		pods    []runtime.Object
		refused bool
	}{
		{"a pod without a controller", []runtime.Object{onNode("bare", nil)}, true},
		{"a DaemonSet that cannot be read", []runtime.Object{onNode("kube-proxy-a", daemon)}, false},
		{"both", []runtime.Object{onNode("bare", nil), onNode("kube-proxy-a", daemon)}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cs := fake.NewClientset(append(c.pods, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-proxy"}})...)
			cs.PrependReactor("get", "daemonsets", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, errors.New(`Get "https://127.0.0.1:1/apis/apps/v1/namespaces/kube-system/daemonsets/kube-proxy": dial tcp 127.0.0.1:1: connect: connection refused`)
			})
			h := drainHelper(t.Context(), cs, slog.New(slog.DiscardHandler), 0)
			_, errs := h.GetPodsForDeletion("n1")
			if len(errs) == 0 {
				t.Fatal("the drain helper's list had no errors")
			}
			if got := onlyRefusals(errs); got != c.refused {
				t.Errorf("onlyRefusals(%v) = %v, want %v", errs, got, c.refused)
			}
		})
	}
}
