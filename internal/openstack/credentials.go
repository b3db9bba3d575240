package openstack

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/api/v1alpha1"
)

// CloudCredentials reads a plan's clouds.yaml and CA from its identity
// Secret, or from the plan's source Secret while the identity Secret is not
// filled yet (IdentityCredentials).
func CloudCredentials(ctx context.Context, c client.Reader, p *v1alpha1.MigrationPlan) (Credentials, error) {
	return IdentityCredentials(ctx, c, p.Spec.Cluster.Namespace, p.Spec.Target.Identity)
}

// IdentityCredentials reads clouds.yaml and the CA of an identity from its
// Secret in namespace, the cluster's, or from the Secret it is copied
// from while its own is not filled yet. The values stay in the returned
// Credentials; errors name Secrets, never their contents.
func IdentityCredentials(ctx context.Context, c client.Reader, namespace string, id v1alpha1.Identity) (Credentials, error) {
	var sec corev1.Secret
	key := client.ObjectKey{Namespace: namespace, Name: id.SecretName}
	err := c.Get(ctx, key, &sec)
	if err == nil && len(sec.Data[CloudsKey]) > 0 {
		return CredentialsFromSecret(sec.Data, id.CloudName)
	}
	if id.From == nil {
		return Credentials{}, fmt.Errorf("no credentials: Secret %s has no %s", key, CloudsKey)
	}
	src := client.ObjectKey{Namespace: id.From.Namespace, Name: id.From.Name}
	if err := c.Get(ctx, src, &sec); err != nil {
		return Credentials{}, fmt.Errorf("no credentials: read Secret %s: %w", src, err)
	}
	data := map[string][]byte{CloudsKey: sec.Data[id.From.CloudsKey]}
	if id.From.CACertKey != "" {
		data[CACertKey] = sec.Data[id.From.CACertKey]
	}
	creds, err := CredentialsFromSecret(data, id.CloudName)
	if err != nil {
		return creds, fmt.Errorf("Secret %s: %w", src, err)
	}
	return creds, nil
}
