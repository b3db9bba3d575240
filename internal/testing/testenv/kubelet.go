package testenv

import (
	"context"

	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// Kubelet is a stand-in for the kubelets of a test's workload cluster, not
// a kubelet: envtest runs an API server and etcd only, so nothing would
// ever finish the termination of a pod bound to a node. An evicted or
// deleted pod with spec.nodeName keeps a deletionTimestamp forever, and a
// drain that waits for it never ends.
//
// The stand-in watches every pod; one that is being deleted and is bound
// to a node is deleted with grace period 0, as a kubelet does once the
// containers stopped. MarkRunning sets a pod Running and Ready, as a
// kubelet reports a started pod (PodDisruptionBudgets count only Ready
// pods as healthy). It runs no containers and reports no node status.
type Kubelet struct {
	clientset kubernetes.Interface
	t         T
}

// StartKubelet starts the stand-in against k, and stops it when the test
// ends (before k's API server stops, as cleanups run last-in first-out).
func StartKubelet(t T, k *Kube) *Kubelet {
	t.Helper()
	cs, err := kubernetes.NewForConfig(k.Config)
	if err != nil {
		t.Fatalf("testenv: kubelet stand-in: clientset for %s: %v", k.Config.Host, err)
	}
	kl := &Kubelet{clientset: cs, t: t}

	factory := informers.NewSharedInformerFactory(cs, 0)
	pods := factory.Core().V1().Pods().Informer()
	finish := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok {
			kl.finishTermination(pod)
		}
	}
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    finish,
		UpdateFunc: func(_, obj any) { finish(obj) },
	}); err != nil {
		t.Fatalf("testenv: kubelet stand-in: watch pods: %v", err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	// Shutdown waits until the handlers returned, so no handler logs
	// through t after the test ended.
	t.Cleanup(func() {
		close(stop)
		factory.Shutdown()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced) {
		t.Fatalf("testenv: kubelet stand-in: pod watch did not sync")
	}
	t.Logf("testenv: kubelet stand-in started: it finishes the termination of pods bound to nodes at %s", k.Config.Host)
	return kl
}

// finishTermination deletes a terminating pod with grace period 0, the
// kubelet's last step once the containers are gone. The UID precondition
// keeps it from deleting a new pod of the same name.
func (kl *Kubelet) finishTermination(pod *corev1.Pod) {
	if pod.DeletionTimestamp == nil || pod.Spec.NodeName == "" {
		return
	}
	err := kl.clientset.CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64),
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	switch {
	case err == nil:
		kl.t.Logf("testenv: kubelet stand-in: pod %s/%s on node %s terminated (grace period 0)", pod.Namespace, pod.Name, pod.Spec.NodeName)
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Gone already, or replaced by a pod of the same name.
	default:
		kl.t.Logf("testenv: kubelet stand-in: finish termination of pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
}

// MarkRunning reports a pod Running and Ready, as a kubelet does once its
// containers started and passed their readiness probes.
func (kl *Kubelet) MarkRunning(t T, namespace, name string) {
	t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := kl.clientset.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		pod.Status.Phase = corev1.PodRunning
		pod.Status.StartTime = &now
		pod.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
		pod.Status.ContainerStatuses = nil
		for _, c := range pod.Spec.Containers {
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: new(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			})
		}
		_, err = kl.clientset.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("testenv: kubelet stand-in: mark pod %s/%s running: %v", namespace, name, err)
	}
}
