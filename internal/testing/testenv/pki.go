package testenv

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// PKI is a kubeadm cluster's certificate authorities and service-account
// key pair, as kubeadm writes them to /etc/kubernetes/pki and Cluster API
// keeps them in the <cluster>-ca, -etcd, -proxy and -sa Secrets (tls.crt
// and tls.key, PEM). A workload API server started with it (StartKubeWith)
// serves a certificate its CA signed, accepts client certificates its CA
// signed and verifies service-account tokens with its key, so that what
// Cluster API generates from these Secrets (a kubeconfig, say) works
// against it as against a real cluster.
type PKI struct {
	CA, EtcdCA, FrontProxyCA, ServiceAccount KeyPair
}

// KeyPair is a PEM certificate (for ServiceAccount: a PEM public key) and
// its PEM private key.
type KeyPair struct {
	Cert, Key []byte
}

// NewPKI generates the authorities of cluster name: RSA 2048, valid ten
// years, as kubeadm makes them.
func NewPKI(t T, name string) *PKI {
	t.Helper()
	ca := func(cn string) KeyPair {
		t.Helper()
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatalf("testenv: key for %s: %v", cn, err)
		}
		tmpl := &x509.Certificate{
			SerialNumber:          serial(t),
			Subject:               pkix.Name{CommonName: cn},
			NotBefore:             time.Now().Add(-time.Hour),
			NotAfter:              time.Now().AddDate(10, 0, 0),
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			BasicConstraintsValid: true,
			IsCA:                  true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatalf("testenv: certificate for %s: %v", cn, err)
		}
		return KeyPair{Cert: pemBlock("CERTIFICATE", der), Key: pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key))}
	}
	p := &PKI{CA: ca("kubernetes"), EtcdCA: ca("etcd-ca"), FrontProxyCA: ca("front-proxy-ca")}
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("testenv: service-account key of %s: %v", name, err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		t.Fatalf("testenv: service-account key of %s: %v", name, err)
	}
	p.ServiceAccount = KeyPair{Cert: pemBlock("PUBLIC KEY", pub), Key: pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(sa))}
	return p
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func serial(t T) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("testenv: serial number: %v", err)
	}
	return n
}

// parse returns a CA's certificate and key.
func (kp KeyPair) parse() (*x509.Certificate, crypto.Signer, error) {
	cb, _ := pem.Decode(kp.Cert)
	kb, _ := pem.Decode(kp.Key)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("not a PEM certificate and key")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParsePKCS1PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// sign issues a leaf certificate from the CA kp for cn in organizations,
// as a server for hosts when any are given, else as a client.
func (kp KeyPair) sign(cn string, organizations []string, hosts ...string) (KeyPair, error) {
	ca, caKey, err := kp.parse()
	if err != nil {
		return KeyPair{}, err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return KeyPair{}, err
	}
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return KeyPair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: n,
		Subject:      pkix.Name{CommonName: cn, Organization: organizations},
		NotBefore:    time.Now().Add(-time.Hour),
		// A year, as kubeadm's: Cluster API renews a kubeconfig's client
		// certificate only when it has less than six months left.
		NotAfter:    time.Now().AddDate(1, 0, 0),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if len(hosts) > 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{Cert: pemBlock("CERTIFICATE", der), Key: pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key))}, nil
}

// configureAPIServer makes envtest's API server use p: its serving
// certificate and service-account keys are written into a certificate
// directory of its own, and client certificates (the admin's too) are
// signed by p's CA.
func (p *PKI) configureAPIServer(t T, api *envtest.APIServer, address string) {
	t.Helper()
	dir := t.TempDir()
	// 10.0.0.1 is the kubernetes Service's address in envtest's service
	// range, which pods on real nodes call.
	hosts := []string{"127.0.0.1", "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "10.0.0.1"}
	if address != "" {
		hosts = append(hosts, address)
	}
	serving, err := p.CA.sign("kube-apiserver", nil, hosts...)
	if err != nil {
		t.Fatalf("testenv: API server certificate: %v", err)
	}
	// The file names envtest's API server arguments use.
	for name, data := range map[string][]byte{
		"apiserver.crt": serving.Cert, "apiserver.key": serving.Key,
		"sa-signer.crt": p.ServiceAccount.Cert, "sa-signer.key": p.ServiceAccount.Key,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatalf("testenv: %v", err)
		}
	}
	api.CertDir = dir
	api.SecureServing.CA = p.CA.Cert
	api.SecureServing.Authn = &pkiAuthn{ca: p.CA}
}

// pkiAuthn is envtest's client-certificate authentication with the
// cluster's CA instead of one of envtest's own.
type pkiAuthn struct {
	ca  KeyPair
	dir string
}

var _ envtest.Authn = (*pkiAuthn)(nil)

func (a *pkiAuthn) path() string { return filepath.Join(a.dir, "client-ca.crt") }

func (a *pkiAuthn) Configure(workDir string, args *envtest.Arguments) error {
	a.dir = workDir
	args.Set("client-ca-file", a.path())
	return nil
}

func (a *pkiAuthn) Start() error { return os.WriteFile(a.path(), a.ca.Cert, 0o600) }

func (a *pkiAuthn) AddUser(user envtest.User, base *rest.Config) (*rest.Config, error) {
	kp, err := a.ca.sign(user.Name, user.Groups)
	if err != nil {
		return nil, fmt.Errorf("client certificate for %s: %w", user.Name, err)
	}
	cfg := rest.CopyConfig(base)
	cfg.CertData, cfg.KeyData = kp.Cert, kp.Key
	return cfg, nil
}

func (a *pkiAuthn) Stop() error { return nil }
