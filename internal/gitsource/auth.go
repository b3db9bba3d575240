package gitsource

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"

	"github.com/ferry-dev/ferry/internal/redact"
	"github.com/ferry-dev/ferry/internal/secretfile"
)

// Auth says how to authenticate to the plans repository. The zero value is
// no authentication, which is what file:// and public http(s) repositories
// need. Secrets are named by file, not given inline, so that they can come
// from a mounted Kubernetes Secret and be rotated without a restart: the
// files are read again on every poll.
type Auth struct {
	// Username for HTTP basic authentication and for SSH. For HTTP it
	// defaults to the user in the URL, then to "git" (forges ignore the
	// user name when the password is a token). For SSH it defaults to the
	// user in the URL, then to "git".
	Username string
	// TokenFile holds the HTTP password or access token (surrounding
	// white space is trimmed). Only for http(s) URLs.
	TokenFile string
	// SSHKeyFile holds a PEM or OpenSSH private key. Required for ssh URLs.
	SSHKeyFile string
	// SSHPassphraseFile holds the passphrase of an encrypted SSHKeyFile;
	// empty when the key is not encrypted.
	SSHPassphraseFile string
	// KnownHostsFile is an OpenSSH known_hosts file that the server's host
	// key is checked against. Required for ssh URLs unless
	// InsecureIgnoreHostKey is set.
	KnownHostsFile string
	// InsecureIgnoreHostKey accepts any SSH host key. Whoever can redirect
	// the connection can then serve ferry plans that nobody reviewed, so
	// it is meant for throw-away test setups only, and it is logged.
	InsecureIgnoreHostKey bool
}

// endpoint is the parsed repository URL, split into what go-git may see
// and what stays with us.
type endpoint struct {
	// clean is the URL without user information: it is what go-git gets,
	// so that no error go-git builds from it can carry a credential.
	clean string
	// display is the URL for messages and logs, user information redacted.
	display  string
	protocol string
	// user and password come from the URL's user information.
	user, password string
	// hostPort is host:port, for picking SSH host key algorithms.
	hostPort string
}

// parseEndpoint parses a repository URL: http(s)://, ssh://, scp-like
// user@host:path, file:// or a plain path. It never echoes raw, as raw may
// hold a credential.
func parseEndpoint(raw string) (endpoint, error) {
	ep, err := transport.NewEndpoint(raw)
	if err != nil {
		return endpoint{}, errors.New("parse repository URL: not a valid URL")
	}
	e := endpoint{protocol: ep.Protocol, user: ep.User, password: ep.Password}
	switch ep.Protocol {
	case "http", "https", "ssh", "file":
	default:
		// git:// has neither authentication nor encryption.
		return endpoint{}, fmt.Errorf("repository URL %s: unsupported protocol %q; use https, http, ssh or file", RedactURL(raw), ep.Protocol)
	}
	bare := *ep
	bare.User, bare.Password = "", ""
	e.clean = bare.String()
	e.display = RedactURL(raw)
	port := ep.Port
	if port == 0 && ep.Protocol == "ssh" {
		port = 22
	}
	e.hostPort = net.JoinHostPort(ep.Host, strconv.Itoa(port))
	return e, nil
}

// RedactURL returns a repository URL fit for a log line or an error: the
// user information of an http(s) or file URL is replaced by "***" (a token
// is often passed as the user name) and its query string too
// (internal/redact's URL), the password of an ssh URL is dropped and its
// user kept (the SSH login, such as "git", is no secret). A string that
// does not parse is not echoed at all.
func RedactURL(raw string) string {
	ep, err := transport.NewEndpoint(raw)
	if err != nil {
		return "<unparsable URL>"
	}
	if ep.Protocol == "ssh" {
		red := *ep
		red.Password = ""
		return red.String()
	}
	return redact.URL(ep.String())
}

// check refuses an Auth that does not fit the URL's protocol, before the
// first poll, so that a misconfiguration shows at start-up and not as a
// stream of failed polls.
func (a Auth) check(e endpoint) error {
	sshSet := a.SSHKeyFile != "" || a.SSHPassphraseFile != "" || a.KnownHostsFile != "" || a.InsecureIgnoreHostKey
	switch e.protocol {
	case "file":
		if sshSet || a.TokenFile != "" || a.Username != "" {
			return fmt.Errorf("repository %s: file URLs take no credentials", e.display)
		}
	case "http", "https":
		if sshSet {
			return fmt.Errorf("repository %s: SSH settings given for an %s URL", e.display, e.protocol)
		}
		if a.TokenFile != "" && e.password != "" {
			return fmt.Errorf("repository %s: a password in the URL and a token file; give only the token file", e.display)
		}
	case "ssh":
		if a.TokenFile != "" {
			return fmt.Errorf("repository %s: a token file given for an ssh URL; use an SSH key", e.display)
		}
		if a.SSHKeyFile == "" {
			return fmt.Errorf("repository %s: an ssh URL needs an SSH key file", e.display)
		}
		if a.KnownHostsFile == "" && !a.InsecureIgnoreHostKey {
			return fmt.Errorf("repository %s: no known_hosts file given, and ferry does not accept "+
				"an SSH host key it cannot check; give a known_hosts file (ssh-keyscan HOST > known_hosts, "+
				"then verify it), or set the insecure ignore-host-key option for a test setup", e.display)
		}
		if a.KnownHostsFile != "" && a.InsecureIgnoreHostKey {
			return fmt.Errorf("repository %s: both a known_hosts file and the insecure ignore-host-key option; choose one", e.display)
		}
	}
	for _, f := range []string{a.TokenFile, a.SSHKeyFile, a.SSHPassphraseFile, a.KnownHostsFile} {
		if f == "" {
			continue
		}
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("repository %s: credentials: %w", e.display, err)
		}
	}
	return nil
}

// method builds the go-git auth method from the files, read now so that a
// rotated secret is picked up. It also returns the secret values, which
// scrub keeps out of error messages, and registers them with
// internal/redact, which keeps them out of every log line and status.
func (a Auth) method(e endpoint) (_ transport.AuthMethod, secrets []string, _ error) {
	defer func() { redact.Register(secrets...) }()
	switch {
	case e.protocol == "ssh":
		return a.sshMethod(e)
	case a.TokenFile != "":
		token, err := readSecret(a.TokenFile)
		if err != nil {
			return nil, nil, fmt.Errorf("read token: %w", err)
		}
		user := firstNonEmpty(a.Username, e.user, "git")
		return &githttp.BasicAuth{Username: user, Password: token}, []string{token}, nil
	case e.user != "" || e.password != "":
		// Credentials in an http(s) URL are moved into basic auth: go-git
		// only ever sees the URL without them. A lone user name is most
		// likely a token (GitHub accepts https://TOKEN@github.com/...).
		user := firstNonEmpty(a.Username, e.user, "git")
		secrets := []string{e.password}
		if e.password == "" {
			secrets = []string{e.user}
		}
		return &githttp.BasicAuth{Username: user, Password: e.password}, secrets, nil
	}
	return nil, nil, nil
}

// sshMethod builds public-key authentication with the host key checked
// against the known_hosts file.
func (a Auth) sshMethod(e endpoint) (transport.AuthMethod, []string, error) {
	key, err := os.ReadFile(a.SSHKeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("read SSH key: %w", err)
	}
	var passphrase string
	if a.SSHPassphraseFile != "" {
		if passphrase, err = readSecret(a.SSHPassphraseFile); err != nil {
			return nil, nil, fmt.Errorf("read SSH key passphrase: %w", err)
		}
	}
	user := firstNonEmpty(e.user, a.Username, "git")
	pk, err := gitssh.NewPublicKeys(user, key, passphrase)
	if err != nil {
		// The parser's message names neither the key nor the passphrase.
		return nil, nil, fmt.Errorf("parse SSH key %s: %w", a.SSHKeyFile, err)
	}
	if a.InsecureIgnoreHostKey {
		pk.HostKeyCallback = ssh.InsecureIgnoreHostKey()
	} else {
		db, err := gitssh.NewKnownHostsDb(a.KnownHostsFile)
		if err != nil {
			return nil, nil, fmt.Errorf("read known_hosts %s: %w", a.KnownHostsFile, err)
		}
		pk.HostKeyCallback = db.HostKeyCallback()
		// Offer only the key types known_hosts has for this host: otherwise
		// the server may present another type of key, which would fail
		// the check although the host is the right one.
		pk.HostKeyAlgorithms = db.HostKeyAlgorithms(e.hostPort)
	}
	secrets := []string{passphrase}
	return pk, secrets, nil
}

// readSecret reads a one-line secret file (secretfile.Read).
func readSecret(file string) (string, error) { return secretfile.Read(file) }

// Remote is how to reach a repository URL with auth, for a Branch that
// pushes where the Source reads: the URL without user information (what
// go-git may see), the go-git auth method built from auth's files (read
// now, so that a rotated secret is picked up), and a function that keeps
// those secrets out of an error. A Branch fetches and pushes with it, so
// that an ssh remote is pushed to with the same key and known_hosts it is
// read with.
func Remote(url string, auth Auth) (clean string, method transport.AuthMethod, scrubErr func(error) error, err error) {
	ep, err := parseEndpoint(url)
	if err != nil {
		return "", nil, nil, err
	}
	if err := auth.check(ep); err != nil {
		return "", nil, nil, err
	}
	method, secrets, err := auth.method(ep)
	if err != nil {
		return "", nil, nil, fmt.Errorf("repository %s: %w", ep.display, err)
	}
	return ep.clean, method, func(err error) error { return scrub(err, secrets) }, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// scrub returns err with the secrets of one remote masked, besides every
// value registered with internal/redact and any URL's credentials
// (redact.Error: errors.Is and errors.As still see the original, which
// it does not unwrap to). go-git never sees a URL with credentials, so
// this is a second line of defence, against a server or library that
// echoes what it was sent.
func scrub(err error, secrets []string) error { return redact.Error(err, secrets...) }
