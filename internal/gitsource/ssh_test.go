package gitsource_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/gitsource"
	"github.com/ferry-dev/ferry/internal/testing/testenv"
)

// sshServer is an SSH server that completes the handshake and accepts any
// client key, then refuses every channel: enough to see whether the
// client accepted the host key, without a Git server behind it.
type sshServer struct {
	addr    string
	hostKey ssh.PublicKey
}

// refusal is what the server says when a channel is opened; seeing it
// means the handshake, host key check included, succeeded.
const refusal = "no git behind this test server"

func startSSH(t *testing.T) *sshServer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(ssh.ConnMetadata, ssh.PublicKey) (*ssh.Permissions, error) { return nil, nil },
	}
	cfg.AddHostKey(signer)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_, chans, reqs, err := ssh.NewServerConn(conn, cfg)
				if err != nil {
					return // the client refused the host key
				}
				go ssh.DiscardRequests(reqs)
				for ch := range chans {
					_ = ch.Reject(ssh.Prohibited, refusal) // fails only when the client has gone
				}
			}()
		}
	}()
	return &sshServer{addr: l.Addr().String(), hostKey: signer.PublicKey()}
}

// writeFile writes a test file and returns its path.
func writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// clientKey writes a client private key, encrypted when passphrase is set.
func clientKey(t *testing.T, passphrase string) string {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var block *pem.Block
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(priv, "ferry test")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "ferry test", []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "id_ed25519", pem.EncodeToMemory(block))
}

// TestSSHHostKey polls an SSH server with the host key known, unknown,
// wrong, and unchecked.
func TestSSHHostKey(t *testing.T) {
	srv := startSSH(t)
	_, otherPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	other, err := ssh.NewSignerFromKey(otherPriv)
	if err != nil {
		t.Fatal(err)
	}
	host := knownhosts.Normalize(srv.addr)
	line := func(hosts string, key ssh.PublicKey) []byte {
		return []byte(knownhosts.Line([]string{hosts}, key) + "\n")
	}
	key := clientKey(t, "")
	const passphrase = "correct horse battery"
	encrypted := clientKey(t, passphrase)

	for _, tc := range []struct {
		name     string
		auth     gitsource.Auth
		want     string // in the error
		terminal bool
	}{
		{name: "known host", auth: gitsource.Auth{SSHKeyFile: key, KnownHostsFile: writeFile(t, "known_hosts", line(host, srv.hostKey))},
			want: refusal},
		{name: "encrypted key", auth: gitsource.Auth{SSHKeyFile: encrypted, SSHPassphraseFile: writeFile(t, "pass", []byte(passphrase+"\n")),
			KnownHostsFile: writeFile(t, "known_hosts", line(host, srv.hostKey))}, want: refusal},
		{name: "wrong passphrase", auth: gitsource.Auth{SSHKeyFile: encrypted, SSHPassphraseFile: writeFile(t, "pass", []byte("wrong-passphrase")),
			KnownHostsFile: writeFile(t, "known_hosts", line(host, srv.hostKey))}, want: "parse SSH key", terminal: true},
		{name: "host key mismatch", auth: gitsource.Auth{SSHKeyFile: key, KnownHostsFile: writeFile(t, "known_hosts", line(host, other.PublicKey()))},
			want: "knownhosts: key mismatch", terminal: true},
		{name: "unknown host", auth: gitsource.Auth{SSHKeyFile: key, KnownHostsFile: writeFile(t, "known_hosts", line("[example.com]:22", srv.hostKey))},
			want: "knownhosts: key is unknown", terminal: true},
		{name: "insecure", auth: gitsource.Auth{SSHKeyFile: key, InsecureIgnoreHostKey: true}, want: refusal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := gitsource.New(gitsource.Config{URL: "ssh://git@" + srv.addr + "/plans.git", CacheDir: t.TempDir(), Auth: tc.auth})
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = src.Poll(t.Context())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("poll: %v; want an error saying %q", err, tc.want)
			}
			t.Logf("%v", err)
			if got := failure.IsTerminal(err); got != tc.terminal {
				t.Errorf("poll: %v: terminal %v; want %v", err, got, tc.terminal)
			}
			if strings.Contains(err.Error(), passphrase) || strings.Contains(err.Error(), "wrong-passphrase") {
				t.Errorf("poll error holds the passphrase: %v", err)
			}
		})
	}
}

// TestSSHPoll reads the plans repository from a real Git server over ssh
// with the key and known_hosts given.
func TestSSHPoll(t *testing.T) {
	g := testenv.StartGit(t, seedPlans(t))
	s := testenv.StartSSHGit(t, g)
	src, err := gitsource.New(gitsource.Config{URL: s.URL, CacheDir: t.TempDir(),
		Auth: gitsource.Auth{SSHKeyFile: s.KeyFile, KnownHostsFile: s.KnownHosts}})
	if err != nil {
		t.Fatal(err)
	}
	rev, changed, err := src.Poll(t.Context())
	if err != nil || !changed {
		t.Fatalf("poll over ssh: %s, %v, %v", rev, changed, err)
	}
	if want := serverHead(t, g.Dir); rev != want {
		t.Errorf("poll over ssh: head %s; want %s", rev, want)
	}
}
