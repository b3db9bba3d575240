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
// refuses a value that is not what its target key says (a token copied as
// clouds.yaml, say) without writing anything, and never shows a value.
func TestKubeCopySecret(t *testing.T) {
	k := testenv.StartKube(t)
	e := newExecutor(t, k)
	const (
		password = "source-password-never-shown"
		oldValue = "target-value-kept"
		// A forge token, as ferry's own Secret ferry-credentials holds it
		// (deploy/base/deployment.yaml mounts it into ferry's pod).
		token = "ghp_forgeTokenNeverShown0123456789abcdef"
	)
	pki := testenv.NewPKI(t, "cloud")
	caCert := string(pki.CA.Cert)
	cloudsYAML := "clouds:\n  openstack:\n    auth:\n      auth_url: https://keystone.example:5000/v3\n      password: " + password + "\n"
	mustCreate(t, k.Client,
		&corev1.Secret{ObjectMeta: testMeta("credentials"),
			Data: map[string][]byte{"clouds.yaml": []byte(cloudsYAML), "ca.pem": []byte(caCert)}},
		&corev1.Secret{ObjectMeta: testMeta("typed"), Type: clusterv1.ClusterSecretType,
			Data: map[string][]byte{"tls.crt": []byte(caCert), "tls.key": []byte(password)}},
		&corev1.Secret{ObjectMeta: testMeta("ferry-credentials"),
			Data: map[string][]byte{"forge-token": []byte(token), "git-token": []byte(token)}},
		&corev1.Secret{ObjectMeta: testMeta("look-alikes"), Data: map[string][]byte{
			"no-clouds":      []byte("clouds: {}\n"),
			"string-cloud":   []byte("clouds:\n  openstack: " + token + "\n"),
			"other-yaml":     []byte("token: " + token + "\n"),
			"private-key":    pki.CA.Key,
			"text-and-cert":  []byte(token + "\n" + caCert),
			"not-a-cert-der": []byte("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n"),
		}})
	cloudKeys := "clouds.yaml<-clouds.yaml,cacert<-ca.pem"
	const notClouds = "copied as clouds.yaml, is not a clouds.yaml"
	const notCA = "copied as cacert, is not PEM CA certificates"
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
		want:   map[string]string{"clouds.yaml": cloudsYAML, "cacert": caCert}, wantType: corev1.SecretTypeOpaque, wantMove: true,
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
	}, {
		// Issue 34: a plan's identity.from naming ferry's own Secret.
		name:    "ferry's forge token copied as clouds.yaml is refused, and nothing is written",
		target:  "token-as-clouds",
		params:  map[string]string{"from": "default/ferry-credentials", "keys": "clouds.yaml<-forge-token"},
		wantErr: `copy Secret default/ferry-credentials to Secret default/token-as-clouds: key "forge-token" of the source, ` + notClouds,
	}, {
		name:    "a token copied as cacert is refused",
		target:  "token-as-cacert",
		params:  map[string]string{"from": "default/ferry-credentials", "keys": "cacert<-git-token"},
		wantErr: `key "git-token" of the source, ` + notCA,
	}, {
		name:     "a token copied into an existing target is refused, and the target left as it was",
		target:   "token-into-existing",
		existing: map[string]string{"cacert": oldValue},
		params:   map[string]string{"from": "default/ferry-credentials", "keys": "clouds.yaml<-forge-token,cacert<-git-token"},
		wantErr:  `key "forge-token" of the source, ` + notClouds,
	}, {
		name:    "a clouds.yaml with no cloud is refused",
		target:  "no-clouds",
		params:  map[string]string{"from": "default/look-alikes", "keys": "clouds.yaml<-no-clouds"},
		wantErr: `key "no-clouds" of the source, ` + notClouds,
	}, {
		name:    "a clouds.yaml whose cloud is a string is refused",
		target:  "string-cloud",
		params:  map[string]string{"from": "default/look-alikes", "keys": "clouds.yaml<-string-cloud"},
		wantErr: `key "string-cloud" of the source, ` + notClouds,
	}, {
		name:    "YAML without clouds is refused",
		target:  "other-yaml",
		params:  map[string]string{"from": "default/look-alikes", "keys": "clouds.yaml<-other-yaml"},
		wantErr: `key "other-yaml" of the source, ` + notClouds,
	}, {
		name:    "a private key copied as cacert is refused",
		target:  "private-key",
		params:  map[string]string{"from": "default/look-alikes", "keys": "cacert<-private-key"},
		wantErr: `key "private-key" of the source, ` + notCA,
	}, {
		name:    "text before a certificate is refused, not skipped",
		target:  "text-and-cert",
		params:  map[string]string{"from": "default/look-alikes", "keys": "cacert<-text-and-cert"},
		wantErr: `key "text-and-cert" of the source, ` + notCA,
	}, {
		name:    "a CERTIFICATE block that holds no certificate is refused",
		target:  "not-a-cert",
		params:  map[string]string{"from": "default/look-alikes", "keys": "cacert<-not-a-cert-der"},
		wantErr: `key "not-a-cert-der" of the source, ` + notCA,
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
				for _, v := range []string{password, caCert, oldValue, token} {
					if strings.Contains(rep.Message, v) || (err != nil && strings.Contains(err.Error(), v)) {
						t.Fatalf("a secret value shows in the report %q or error %v", rep.Message, err)
					}
				}
				if tc.wantErr != "" {
					// The API server's state first: a check that let a
					// copy through shows what it wrote.
					checkUnchanged(t, k.Client, name, tc.existing)
					checkErr(t, ev, err, tc.wantErr)
					return
				}
				checkErr(t, ev, err, "")
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

// checkUnchanged checks that a refused copy left Secret name as it was:
// absent when existing is nil, else with exactly that data.
func checkUnchanged(t *testing.T, c client.Client, name string, existing map[string]string) {
	t.Helper()
	var got corev1.Secret
	err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &got)
	if existing == nil {
		if !apierrors.IsNotFound(err) {
			t.Errorf("a refused copy left Secret %s behind (err %v)", name, err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]string{}
	for k, v := range got.Data {
		data[k] = string(v)
	}
	testenv.Expect(t, "data after a refused copy", data, existing)
}
