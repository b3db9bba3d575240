package events_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/ferry-dev/ferry/internal/events"
)

// TestConnectTLS: against a real nats-server that takes TLS only and a
// user with a password, Connect with --nats-ca's CA bundle and the user's
// password file reaches it and ensures the streams; without the CA (the
// server's certificate unverified), or without the password, it does not.
func TestConnectTLS(t *testing.T) {
	dir := t.TempDir()
	ca, cert := testCerts(t, dir)
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		Username:  "ferry-reconciler", Password: "pa55word",
		NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("the TLS server is not ready")
	}
	password := filepath.Join(dir, "password")
	if err := os.WriteFile(password, []byte("pa55word\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := ns.ClientURL() // tls://127.0.0.1:PORT
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, opts := range map[string]events.BusOptions{
		"without the CA":       {URL: url, User: "ferry-reconciler", PasswordFile: password},
		"without the password": {URL: url, TLSCA: ca},
	} {
		if b, err := events.Connect(ctx, opts); err == nil {
			b.Close()
			t.Errorf("%s: connected", name)
		}
	}
	b := connect(t, ctx, events.BusOptions{URL: url, TLSCA: ca, User: "ferry-reconciler", PasswordFile: password})
	if !b.Conn.TLSRequired() {
		t.Error("the connection is not over TLS")
	}
	if _, err := b.JS.Stream(ctx, events.StreamSteps); err != nil {
		t.Errorf("the streams over TLS: %v", err)
	}
}

// testCerts writes a CA's certificate to dir/ca.crt and returns its path
// and a server certificate for 127.0.0.1 that the CA signed.
func testCerts(t *testing.T, dir string) (string, tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ferry test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "nats"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return ca, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
