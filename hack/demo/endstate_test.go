package main

import (
	"encoding/base64"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestSecretValues: the values the chaos run looks for include a
// kubeconfig's client key, a clouds.yaml password and a private key, and
// leave out certificates; the scanner finds them as they are and
// base64-encoded.
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
	if len(sc.found) != 2 {
		t.Errorf("found %v; want the base64-encoded and the plain password", sc.found)
	}
}
