package kube_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/step"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// TestKubeCopySecret: copy-secret creates what is missing, adds only the
// keys a target lacks, never overwrites one, refuses what it cannot copy,
// and never shows a value.
func TestKubeCopySecret(t *testing.T) {
	k := testenv.StartKube(t)
	e := newExecutor(t, k)
	const (
		password = "source-password-never-shown"
		caCert   = "source-ca-never-shown"
		oldValue = "target-value-kept"
	)
	mustCreate(t, k.Client,
		&corev1.Secret{ObjectMeta: testMeta("credentials"),
			Data: map[string][]byte{"clouds.yaml": []byte(password), "ca.pem": []byte(caCert)}},
		&corev1.Secret{ObjectMeta: testMeta("typed"), Type: clusterv1.ClusterSecretType,
			Data: map[string][]byte{"tls.crt": []byte(caCert), "tls.key": []byte(password)}})
	cloudKeys := "clouds.yaml<-clouds.yaml,cacert<-ca.pem"
	for _, tc := range []struct {
		name     string
		target   string
		existing map[string]string // the target's data before; nil: no target
		params   map[string]string
		wantErr  string
		want     map[string]string // the target's data after
		wantType corev1.SecretType
		wantMove bool // the clusterctl move label
	}{{
		name:   "a new target with the named keys, renamed, and the label",
		target: "new",
		params: map[string]string{"from": "default/credentials", "keys": cloudKeys, "label": "clusterctl.cluster.x-k8s.io/move=true"},
		want:   map[string]string{"clouds.yaml": password, "cacert": caCert}, wantType: corev1.SecretTypeOpaque, wantMove: true,
	}, {
		// Opaque: KubeadmControlPlane would make itself the controller of
		// a cluster.x-k8s.io/secret, and take the CA with it when deleted.
		name:   "every key, as an Opaque Secret, when no keys are named",
		target: "whole",
		params: map[string]string{"from": "default/typed"},
		want:   map[string]string{"tls.crt": caCert, "tls.key": password}, wantType: corev1.SecretTypeOpaque,
	}, {
		name:     "a key the target has is never overwritten; the missing one is added",
		target:   "kept",
		existing: map[string]string{"clouds.yaml": oldValue},
		params:   map[string]string{"from": "default/credentials", "keys": cloudKeys},
		want:     map[string]string{"clouds.yaml": oldValue, "cacert": caCert}, wantType: corev1.SecretTypeOpaque,
	}, {
		name:     "a target with every key is left alone",
		target:   "alone",
		existing: map[string]string{"clouds.yaml": oldValue, "cacert": oldValue, "extra": oldValue},
		params:   map[string]string{"from": "default/credentials", "keys": cloudKeys},
		want:     map[string]string{"clouds.yaml": oldValue, "cacert": oldValue, "extra": oldValue}, wantType: corev1.SecretTypeOpaque,
	}, {
		name:    "a missing source is terminal",
		target:  "no-source",
		params:  map[string]string{"from": "capi-backup/gone"},
		wantErr: "Secret capi-backup/gone to Secret default/no-source: source not found",
	}, {
		name:    "a key the source lacks is terminal",
		target:  "no-key",
		params:  map[string]string{"from": "default/credentials", "keys": "cacert<-ca.crt"},
		wantErr: `the source has no key "ca.crt"`,
	}, {
		name:    "a malformed keys parameter is terminal",
		target:  "bad-keys",
		params:  map[string]string{"from": "default/credentials", "keys": "cacert=ca.pem"},
		wantErr: `"cacert=ca.pem" is not dst<-src`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.target
			if tc.existing != nil {
				sec := &corev1.Secret{ObjectMeta: testMeta(name), Data: map[string][]byte{}}
				for k, v := range tc.existing {
					sec.Data[k] = []byte(v)
				}
				mustCreate(t, k.Client, sec)
			}
			ev := event(step.CopySecret, step.Secret, name, tc.params)
			var versions []string
			for attempt := 1; attempt <= 2; attempt++ {
				rep, err := e.Execute(context.Background(), ev)
				for _, v := range []string{password, caCert, oldValue} {
					if strings.Contains(rep.Message, v) || (err != nil && strings.Contains(err.Error(), v)) {
						t.Fatalf("a secret value shows in the report %q or error %v", rep.Message, err)
					}
				}
				checkErr(t, ev, err, tc.wantErr)
				if tc.wantErr != "" {
					err := k.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &corev1.Secret{})
					if !apierrors.IsNotFound(err) {
						t.Errorf("a refused copy left Secret %s behind (err %v)", name, err)
					}
					return
				}
				var got corev1.Secret
				testenv.MustGet(t, k.Client, namespace, name, &got)
				versions = append(versions, got.ResourceVersion)
				data := map[string]string{}
				for k, v := range got.Data {
					data[k] = string(v)
				}
				testenv.Expect(t, "data", data, tc.want)
				testenv.Expect(t, "type", got.Type, tc.wantType)
				testenv.Expect(t, "move label", got.Labels["clusterctl.cluster.x-k8s.io/move"] == "true", tc.wantMove)
				if tc.existing == nil {
					testenv.Expect(t, "cluster-name label", got.Labels[clusterv1.ClusterNameLabel], cluster)
				}
			}
			if versions[0] != versions[1] {
				t.Errorf("the second run wrote again (resourceVersion %s, then %s)", versions[0], versions[1])
			}
		})
	}
}
