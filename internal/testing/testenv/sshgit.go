package testenv

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHGit serves a Git server's repositories over ssh, as a forge does: each
// session's exec request runs git-upload-pack or git-receive-pack on the
// repository it names. It accepts one client key, so that a client that
// connects with another key, or that does not check the host key against
// KnownHosts, is found out.
type SSHGit struct {
	// URL is the plans repository's ssh:// URL.
	URL string
	// KeyFile is the client's private key (OpenSSH format) and KnownHosts
	// a known_hosts file with the server's host key.
	KeyFile, KnownHosts string
}

// StartSSHGit serves g's repositories over ssh on a free port until t ends.
func StartSSHGit(t T, g *Git) *SSHGit {
	t.Helper()
	root := filepath.Dir(g.Dir)
	_, hostSigner := newSSHKey(t)
	clientPriv, client := newSSHKey(t)
	allowed := string(client.PublicKey().Marshal())
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if string(key.Marshal()) != allowed {
				return nil, fmt.Errorf("unknown key")
			}
			return nil, nil
		},
	}
	cfg.AddHostKey(hostSigner)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	serveSSHGitOn(t, ln, cfg, root)

	dir := t.TempDir()
	block, err := ssh.MarshalPrivateKey(clientPriv, "ferry test client")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	s := &SSHGit{
		URL:        "ssh://git@" + ln.Addr().String() + "/" + filepath.Base(g.Dir),
		KeyFile:    filepath.Join(dir, "id_ed25519"),
		KnownHosts: filepath.Join(dir, "known_hosts"),
	}
	line := knownhosts.Line([]string{knownhosts.Normalize(ln.Addr().String())}, hostSigner.PublicKey()) + "\n"
	for path, content := range map[string][]byte{s.KeyFile: pem.EncodeToMemory(block), s.KnownHosts: []byte(line)} {
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatalf("testenv: %v", err)
		}
	}
	return s
}

// newSSHKey generates an ed25519 key and its signer.
func newSSHKey(t T) (ed25519.PrivateKey, ssh.Signer) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return priv, signer
}

// serveSSHGitOn accepts connections on ln, each served by serveSSHGit,
// until t ends; then it closes ln and waits for the connections to end.
func serveSSHGitOn(t T, ln net.Listener, cfg *ssh.ServerConfig, root string) {
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				serveSSHGit(conn, cfg, root)
			}()
		}
	}()
}

// serveSSHGit runs one connection: each session may exec git-upload-pack
// or git-receive-pack on a repository under root.
func serveSSHGit(conn net.Conn, cfg *ssh.ServerConfig, root string) {
	defer conn.Close()
	_, chans, reqs, err := ssh.NewServerConn(conn, cfg)
	if err != nil {
		return // a refused key, or a client that refused the host key
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "sessions only")
			continue
		}
		ch, requests, err := nc.Accept()
		if err != nil {
			continue
		}
		go serveSession(ch, requests, root)
	}
}

// serveSession answers a session's exec request with the Git command.
func serveSession(ch ssh.Channel, requests <-chan *ssh.Request, root string) {
	defer ch.Close()
	for req := range requests {
		if req.Type != "exec" || len(req.Payload) < 4 {
			_ = req.Reply(false, nil)
			continue
		}
		command := string(req.Payload[4:]) // a uint32 length, then the command
		service, repo, ok := strings.Cut(command, " ")
		repo = filepath.Join(root, filepath.Clean("/"+strings.Trim(repo, `'"`)))
		if !ok || (service != "git-upload-pack" && service != "git-receive-pack") {
			_ = req.Reply(false, nil)
			return
		}
		_ = req.Reply(true, nil)
		cmd := exec.Command("git", strings.TrimPrefix(service, "git-"), repo)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, ch.Stderr()
		code := uint32(0)
		if err := cmd.Run(); err != nil {
			code = 1
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				code = uint32(ee.ExitCode())
			}
		}
		status := make([]byte, 4)
		binary.BigEndian.PutUint32(status, code)
		_, _ = ch.SendRequest("exit-status", false, status)
		return
	}
}
