package testenv

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Healthy is a PodDisruptionBudget's healthy pod, as the disruption
// controller counts it: Ready and not being deleted.
func Healthy(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

// Serving is Healthy and Running. The eviction API ignores budgets for a
// Pending pod, which a hollow kubelet reports Ready a moment before it
// reports it Running: a drain under test starts once every pod serves.
func Serving(p *corev1.Pod) bool { return Healthy(p) && p.Status.Phase == corev1.PodRunning }

// Pods lists the pods in namespace with labels that pass keep.
func (k *Kube) Pods(ctx context.Context, namespace string, labels map[string]string, keep func(*corev1.Pod) bool) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := k.Client.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels(labels)); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return !keep(&p) }), nil
}

// WatchLeastHealthy counts the healthy pods in namespace with labels every
// 20 ms, from now until the returned function is called, which gives the
// least count seen: what a PodDisruptionBudget over them protects.
func (k *Kube) WatchLeastHealthy(ctx context.Context, namespace string, labels map[string]string) func() int {
	var mu sync.Mutex
	least := -1
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			if pods, err := k.Pods(ctx, namespace, labels, Healthy); err == nil {
				mu.Lock()
				if least < 0 || len(pods) < least {
					least = len(pods)
				}
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() int {
		close(stop)
		<-done
		mu.Lock()
		defer mu.Unlock()
		return least
	}
}

// Evictions counts the successful evictions of each pod
// ("namespace/name") through the eviction API, from the API server's
// audit log.
func (k *Kube) Evictions() (map[string]int, error) {
	f, err := os.Open(k.AuditLog)
	if err != nil {
		return nil, fmt.Errorf("read the API server's audit log: %w", err)
	}
	defer f.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e struct {
			ObjectRef      struct{ Resource, Subresource, Namespace, Name string }
			ResponseStatus struct{ Code int }
		}
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.ObjectRef.Resource == "pods" && e.ObjectRef.Subresource == "eviction" && e.ResponseStatus.Code/100 == 2 {
			counts[e.ObjectRef.Namespace+"/"+e.ObjectRef.Name]++
		}
	}
	return counts, sc.Err()
}

// Evicted reports whether the API server's audit log holds a successful
// eviction of pod p, through the eviction API.
func (k *Kube) Evicted(t T, p *corev1.Pod) bool {
	t.Helper()
	counts, err := k.Evictions()
	if err != nil {
		t.Fatal(err)
	}
	return counts[p.Namespace+"/"+p.Name] > 0
}

// DrainState says whether node is cordoned and how many of its pods a
// drain evicts: those no DaemonSet owns.
func (k *Kube) DrainState(ctx context.Context, node string) (cordoned bool, toEvict int, err error) {
	var n corev1.Node
	if err := k.Client.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
		return false, 0, err
	}
	var pods corev1.PodList
	if err := k.Client.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node}); err != nil {
		return false, 0, err
	}
	for _, p := range pods.Items {
		if !slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "DaemonSet" }) {
			toEvict++
		}
	}
	return n.Spec.Unschedulable, toEvict, nil
}
