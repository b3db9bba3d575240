package kube

import (
	"context"
	"fmt"

	"github.com/ferry-dev/ferry/internal/failure"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ClientFunc builds a controller-runtime client of a workload cluster from
// its kubeconfig; tests replace WorkloadClient with it.
type ClientFunc func(kubeconfig []byte) (client.Client, error)

// ClientsetFunc builds a client-go clientset of a workload cluster from
// its kubeconfig: the drain helper and watches need one.
type ClientsetFunc func(kubeconfig []byte) (kubernetes.Interface, error)

// ReadKubeconfig reads the <cluster>-kubeconfig Secret's value, and says
// where it was read (for errors, which never quote it). A missing Secret is
// retryable: CAPI writes it, and ferry's own cluster phase restores it.
func ReadKubeconfig(ctx context.Context, c client.Reader, namespace, cluster string) ([]byte, string, error) {
	key := client.ObjectKey{Namespace: namespace, Name: cluster + "-kubeconfig"}
	where := KubeconfigSecret(namespace, cluster)
	var sec corev1.Secret
	err := c.Get(ctx, key, &sec)
	switch {
	case apierrors.IsNotFound(err):
		return nil, where, fmt.Errorf("read kubeconfig: %s not found", where)
	case err != nil:
		return nil, where, fmt.Errorf("read kubeconfig %s: %w", where, err)
	case len(sec.Data["value"]) == 0:
		return nil, where, fmt.Errorf("read kubeconfig: %s has no key value", where)
	}
	return sec.Data["value"], where, nil
}

// KubeconfigSecret names the Secret a cluster's kubeconfig is read from,
// as errors about it say: "Secret <namespace>/<cluster>-kubeconfig".
func KubeconfigSecret(namespace, cluster string) string {
	return "Secret " + namespace + "/" + cluster + "-kubeconfig"
}

// UnusableKubeconfigError is a kubeconfig that does not parse or connect.
// It names only where the kubeconfig was read: the parser's own message
// may quote the file, which holds credentials.
type UnusableKubeconfigError struct {
	// Where is the Secret it was read from.
	Where string
}

// Error names the Secret, never its content.
func (e *UnusableKubeconfigError) Error() string {
	return "kubeconfig in " + e.Where + " is not usable"
}

// ConnectWorkload reads a cluster's kubeconfig from its Secret in the
// management cluster and builds a client of the workload cluster with
// build. A kubeconfig build rejects is an *UnusableKubeconfigError, marked
// terminal: no retry mends a kubeconfig, a person or CAPI must replace it.
// An error reading the Secret is returned as it is (retryable).
func ConnectWorkload[C any](ctx context.Context, c client.Reader, namespace, cluster string, build func([]byte) (C, error)) (C, error) {
	var zero C
	data, where, err := ReadKubeconfig(ctx, c, namespace, cluster)
	if err != nil {
		return zero, err
	}
	wc, err := build(data)
	if err != nil {
		return zero, failure.Terminal(&UnusableKubeconfigError{Where: where})
	}
	return wc, nil
}
