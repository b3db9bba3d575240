package main

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"
)

// TestSecretValues: the values the chaos run looks for include a
// kubeconfig's client key, a clouds.yaml password and a private key, and
// leave out certificates; the scanner finds them as they are and
// base64-encoded, alone or inside a longer encoded text.
func TestSecretValues(t *testing.T) {
	key := "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAzZq1privatekeybody\n-----END RSA PRIVATE KEY-----\n"
	kc := clientcmdapi.NewConfig()
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientKeyData: []byte(key), Token: "kube-token-value"}
	kubeconfig, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	secrets := []corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "c-kubeconfig"}, Data: map[string][]byte{"value": kubeconfig}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c-ca"}, Data: map[string][]byte{"tls.crt": []byte("-----BEGIN CERTIFICATE-----\nMIIpubliccertificate\n-----END CERTIFICATE-----\n"), "tls.key": []byte(key)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "cloud"}, Data: map[string][]byte{"clouds.yaml": []byte("clouds:\n  openstack:\n    auth:\n      username: user\n      password: \"s3cret-pass\"\n")}},
	}
	values := secretValues(secrets, "ghp_token1234")
	for _, want := range []string{"MIIEowIBAAKCAQEAzZq1privatekeybody", "kube-token-value", "s3cret-pass", "ghp_token1234"} {
		found := false
		for _, v := range values {
			found = found || strings.Contains(v, want)
		}
		if !found {
			t.Errorf("secret values %q lack %q", values, want)
		}
	}
	for _, v := range values {
		if strings.Contains(v, "MIIpubliccertificate") || v == "user" {
			t.Errorf("secret values hold %q, which is not secret", v)
		}
	}

	sc := &scanner{values: values}
	sc.look("log", `level=INFO msg="step done" target=Secret/c-ca`)
	if len(sc.found) != 0 {
		t.Errorf("found %v in a clean line", sc.found)
	}
	sc.look("nats", `{"data":"`+base64.StdEncoding.EncodeToString([]byte("s3cret-pass"))+`"}`)
	sc.look("comment", "password is s3cret-pass")
	// An Event that quotes the refused copy of the Secret, its data in
	// base64: the password is inside, not at the start.
	sc.look("event", `denied request: {"data": {"clouds.yaml": "`+base64.StdEncoding.EncodeToString(secrets[2].Data["clouds.yaml"])+`"}}`)
	sc.look("log", `msg="step failed" error="auth: {\"password\": \"s3cret-pass\"}"`)
	if len(sc.found) != 4 {
		t.Errorf("found %v; want the base64-encoded, the plain, the quoted-in-base64 and the escaped password", sc.found)
	}
}

// TestPlantAppCredential: the application credential planted in the
// identity Secret leaves the fixture's cloud as it was, and is among the
// values the scan looks for once the Secret is read back.
func TestPlantAppCredential(t *testing.T) {
	fixture := "clouds:\n  openstack:\n    auth:\n      auth_url: http://127.0.0.1:5050/v3\n      username: ferry-test-x\n      password: \"pw-0123456789\"\n    region_name: RegionOne\n"
	key := client.ObjectKey{Namespace: "default", Name: "c-cloud-config"}
	c := fake.NewClientBuilder().WithObjects(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Data: map[string][]byte{"clouds.yaml": []byte(fixture)}}).Build()
	secret, err := plantAppCredential(context.Background(), c, key)
	if err != nil {
		t.Fatal(err)
	}
	var sec corev1.Secret
	if err := c.Get(context.Background(), key, &sec); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Clouds map[string]struct {
			Auth map[string]string `json:"auth"`
		} `json:"clouds"`
	}
	if err := yaml.Unmarshal(sec.Data["clouds.yaml"], &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Clouds["openstack"].Auth["password"] != "pw-0123456789" || doc.Clouds["demo-application-credential"].Auth["application_credential_secret"] != secret {
		t.Errorf("clouds.yaml after planting:\n%s", sec.Data["clouds.yaml"])
	}
	if values := secretValues([]corev1.Secret{sec}); !slices.Contains(values, secret) || !slices.Contains(values, "pw-0123456789") {
		t.Errorf("secret values %q lack the planted application credential %q or the password", values, secret)
	}
}
