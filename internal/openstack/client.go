package openstack

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gcopenstack "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"gopkg.in/yaml.v3"

	"github.com/ferry-dev/ferry/internal/failure"
	"github.com/ferry-dev/ferry/internal/redact"
)

// Keys of a CAPO identity Secret (seed 001).
const (
	CloudsKey = "clouds.yaml"
	CACertKey = "cacert"
)

// Credentials are a clouds.yaml and the CA bundle of a cloud with a private
// CA, as a CAPO identity Secret holds them. They never appear in a log or
// an error.
type Credentials struct {
	// CloudsYAML is the clouds.yaml document.
	CloudsYAML []byte
	// CACert is a PEM bundle; empty uses the system's roots.
	CACert []byte
	// Cloud is the entry of clouds.yaml to use.
	Cloud string
}

// CredentialsFromSecret reads Credentials from a Secret's data.
func CredentialsFromSecret(data map[string][]byte, cloud string) (Credentials, error) {
	c := Credentials{CloudsYAML: data[CloudsKey], CACert: data[CACertKey], Cloud: cloud}
	if len(c.CloudsYAML) == 0 {
		return c, failure.Terminal(fmt.Errorf("the Secret has no %s key", CloudsKey))
	}
	registerSecrets(c.CloudsYAML)
	return c, nil
}

// registerSecrets registers with internal/redact the secrets of every
// cloud in a clouds.yaml, not only the one in use: the document is
// secret as a whole, and an error may quote any of it. A document that
// does not parse registers nothing here; Connect says it is not valid.
func registerSecrets(cloudsYAML []byte) {
	var all clouds.Clouds
	if yaml.Unmarshal(cloudsYAML, &all) != nil {
		return
	}
	for _, cloud := range all.Clouds {
		if a := cloud.AuthInfo; a != nil {
			registerAuth(a.AuthURL, a.Password, a.ApplicationCredentialSecret, a.Token)
		}
	}
}

// registerAuth registers the secrets of one cloud's authentication: its
// password, application credential secret and token, and what its
// auth_url carries in its user information and query string.
func registerAuth(authURL string, secrets ...string) {
	if u, err := url.Parse(authURL); err == nil {
		// A lone user name in a URL is most likely a token.
		if p, ok := u.User.Password(); ok {
			secrets = append(secrets, p)
		} else {
			secrets = append(secrets, u.User.Username())
		}
		for _, vs := range u.Query() {
			secrets = append(secrets, vs...)
		}
	}
	redact.Register(secrets...)
}

// Client talks to one project of one cloud.
type Client struct {
	cloud   string
	compute *gophercloud.ServiceClient
	network *gophercloud.ServiceClient
	image   *gophercloud.ServiceClient
	// loadBalancer is whether the catalog lists a load-balancer service.
	loadBalancer bool
}

// HasLoadBalancer reports whether the cloud's catalog lists a
// load-balancer service (Octavia), which CAPO's API load balancer needs.
func (c *Client) HasLoadBalancer() bool { return c.loadBalancer }

// ErrAuth is wrapped by the error of a Connect whose credentials the cloud
// refused. It is terminal: the same credentials will be refused again.
var ErrAuth = errors.New("credentials refused")

// Connect authenticates with creds and returns a client for its project.
// The clouds.yaml's own cacert path is ignored: the CA comes from the
// Secret's cacert key, since a path would name a file on another machine.
func Connect(ctx context.Context, creds Credentials) (_ *Client, err error) {
	defer scrubErr(&err)
	opts, eo, tlsConfig, err := parseClouds(creds)
	if err != nil {
		return nil, failure.Terminal(fmt.Errorf("read clouds.yaml cloud %q: %w", creds.Cloud, err))
	}
	registerAuth(opts.IdentityEndpoint, opts.Password, opts.ApplicationCredentialSecret, opts.TokenID)
	endpoint := redact.URL(opts.IdentityEndpoint)
	provider, err := gcopenstack.NewClient(opts.IdentityEndpoint)
	if err != nil {
		return nil, failure.Terminal(fmt.Errorf("cloud %q: auth_url %q: %w", creds.Cloud, endpoint, err))
	}
	provider.HTTPClient = http.Client{
		Timeout:   60 * time.Second,
		Transport: trimErrorBodies{next: &http.Transport{TLSClientConfig: tlsConfig, Proxy: http.ProxyFromEnvironment}},
	}
	opts.AllowReauth = true
	if err := gcopenstack.Authenticate(ctx, provider, opts); err != nil {
		if gophercloud.ResponseCodeIs(err, http.StatusUnauthorized) || gophercloud.ResponseCodeIs(err, http.StatusForbidden) {
			return nil, failure.Terminal(fmt.Errorf("authenticate to cloud %q at %s as %q: %w", creds.Cloud, endpoint, opts.Username, ErrAuth))
		}
		return nil, fmt.Errorf("authenticate to cloud %q at %s: %w", creds.Cloud, endpoint, err)
	}
	c := &Client{cloud: creds.Cloud}
	// An endpoint missing from the catalog is as likely a service that does
	// not answer yet as a misconfigured cloud: these errors are retried.
	if c.compute, err = gcopenstack.NewComputeV2(provider, eo); err != nil {
		return nil, fmt.Errorf("cloud %q: compute endpoint: %w", creds.Cloud, err)
	}
	// 2.52 creates servers with tags, which is how ferry marks what it made.
	c.compute.Microversion = "2.52"
	if c.network, err = gcopenstack.NewNetworkV2(provider, eo); err != nil {
		return nil, fmt.Errorf("cloud %q: network endpoint: %w", creds.Cloud, err)
	}
	if c.image, err = gcopenstack.NewImageV2(provider, eo); err != nil {
		return nil, fmt.Errorf("cloud %q: image endpoint: %w", creds.Cloud, err)
	}
	// Octavia is optional: only a plan that asks CAPO for an API load
	// balancer needs it.
	_, err = gcopenstack.NewLoadBalancerV2(provider, eo)
	c.loadBalancer = err == nil
	return c, nil
}

// parseClouds reads the cloud's auth options from clouds.yaml with
// gophercloud's parser, after dropping the cacert path, and builds the TLS
// configuration from the Secret's CA bundle.
func parseClouds(creds Credentials) (gophercloud.AuthOptions, gophercloud.EndpointOpts, *tls.Config, error) {
	var all clouds.Clouds
	if err := yaml.Unmarshal(creds.CloudsYAML, &all); err != nil {
		return gophercloud.AuthOptions{}, gophercloud.EndpointOpts{}, nil, errors.New("clouds.yaml is not valid YAML")
	}
	cloud, ok := all.Clouds[creds.Cloud]
	if !ok {
		names := make([]string, 0, len(all.Clouds))
		for n := range all.Clouds {
			names = append(names, n)
		}
		return gophercloud.AuthOptions{}, gophercloud.EndpointOpts{}, nil, fmt.Errorf("no such cloud; clouds.yaml has %v", names)
	}
	cloud.CACertFile = ""
	one, err := yaml.Marshal(clouds.Clouds{Clouds: map[string]clouds.Cloud{creds.Cloud: cloud}})
	if err != nil {
		return gophercloud.AuthOptions{}, gophercloud.EndpointOpts{}, nil, err
	}
	opts, eo, tlsConfig, err := clouds.Parse(clouds.WithCloudsYAML(bytes.NewReader(one)), clouds.WithCloudName(creds.Cloud))
	if err != nil {
		return opts, eo, nil, err
	}
	if len(creds.CACert) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(creds.CACert) {
			return opts, eo, nil, errors.New("the cacert key holds no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	return opts, eo, tlsConfig, nil
}

// scrubErr keeps the package's promise that no error it returns holds a
// credential: every exported method defers it on its error, which then
// shows no URL's user information or query string (the identity endpoint
// is the clouds.yaml's auth_url, which may carry either) and no value
// registered as secret (redact.Error). The body a service answered an
// error with is already cut short and scrubbed by the client's transport
// (trimErrorBodies).
func scrubErr(err *error) { *err = redact.Error(*err) }

// maxErrorBody is how much of a service's answer to a failed request an
// error quotes. gophercloud copies the whole body into the error's text
// (ErrUnexpectedResponseCode), and a 400 can echo the request, password
// included; the start of the body says what went wrong.
const maxErrorBody = 256

// readErrorBody bounds what is read of such a body: more is never shown.
const readErrorBody = 16 << 10

// trimErrorBodies is the client's transport: it replaces the body of an
// answer with a status of 400 or more by a short, scrubbed excerpt of it
// (redact.Excerpt), before gophercloud reads it into an error. Answers
// that succeed are passed on as they are.
type trimErrorBodies struct{ next http.RoundTripper }

func (t trimErrorBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode < 400 || resp.Body == nil {
		return resp, err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, readErrorBody))
	_ = resp.Body.Close()
	excerpt := redact.Excerpt(body, maxErrorBody)
	resp.Body = io.NopCloser(strings.NewReader(excerpt))
	resp.ContentLength = int64(len(excerpt))
	if resp.Header != nil {
		resp.Header.Del("Content-Length")
	}
	return resp, nil
}
