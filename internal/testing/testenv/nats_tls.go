package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"os"
	"path/filepath"
	"time"
)

// natsTLSTimeout bounds a node's TLS handshake with a client or another
// node: nats-server's default is 2 s, which three nodes and ferry's
// processes on a loaded test machine can miss.
const natsTLSTimeout = 5.0 // seconds, as server.Options take it

// natsTLS is the TLS of a NATS cluster, as docs/install.md sets up a
// production one: a CA, and one certificate it signed that every node
// serves to its clients and presents on its routes. Only the CA's
// certificate is written to disk, for clients (--nats-ca); the keys stay
// in memory.
type natsTLS struct {
	// caFile is the CA's certificate, PEM.
	caFile string
	// clients is a node's configuration for its clients: TLS only,
	// without client certificates (clients log in as a user).
	clients *tls.Config
	// routes is its configuration for its routes, which it both dials and
	// accepts: each side verifies the other's certificate against the CA,
	// as nats-server configures a cluster's tls block with a ca_file.
	routes *tls.Config
}

// newNATSTLS generates a CA and a certificate it signs for the nodes'
// loopback addresses, 127.0.0.1 and localhost (natsCertificates), and
// writes the CA's certificate to dir/ca.crt.
func newNATSTLS(t T, dir string) *natsTLS {
	t.Helper()
	caPEM, certPEM, keyPEM := natsCertificates(t, []net.IP{net.IPv4(127, 0, 0, 1)}, "localhost")
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatalf("testenv: NATS CA certificate: %v", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("testenv: NATS server certificate: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &natsTLS{
		caFile:  caFile,
		clients: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		routes: &tls.Config{
			Certificates: []tls.Certificate{cert},
			RootCAs:      pool,
			ClientCAs:    pool,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS12,
		},
	}
}

// natsCertificates generates a CA (ECDSA P-256, valid a year: longer than
// any test or demo) and a certificate it signs for ips and names, for
// both server and client authentication (a node dials its routes with
// it), and returns the CA's certificate, the certificate and its key, PEM.
func natsCertificates(t T, ips []net.IP, names ...string) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testenv: NATS CA key: %v", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: "ferry-test NATS CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("testenv: NATS CA certificate: %v", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatalf("testenv: NATS CA certificate: %v", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testenv: NATS server key: %v", err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: "ferry-test NATS"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(1, 0, 0),
		IPAddresses:  ips,
		DNSNames:     names,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatalf("testenv: NATS server certificate: %v", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatalf("testenv: NATS server key: %v", err)
	}
	return pemBlock("CERTIFICATE", caDER), pemBlock("CERTIFICATE", der), pemBlock("EC PRIVATE KEY", keyDER)
}
