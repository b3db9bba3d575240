package openstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ferry-dev/ferry/internal/failure"
)

// Secrets planted in the clouds.yaml of the tests below; none may appear
// in an error.
const (
	plantedPassword = "os-test-Pa55w0rd"
	plantedUserinfo = "url-Pa55-in-userinfo"
	plantedQuery    = "query-t0ken-value"
	plantedAppCred  = "other-cloud-app-cred-s3cret"
)

// plantedClouds is a clouds.yaml whose cloud "openstack" authenticates at
// authURL (with a password in its user information and a token in its
// query string) with plantedPassword, and whose other cloud holds an
// application credential secret.
func plantedClouds(authURL string) []byte {
	return fmt.Appendf(nil, `clouds:
  openstack:
    auth:
      auth_url: %s
      username: capo
      password: %s
      project_name: k8s
      user_domain_name: Default
      project_domain_name: Default
    region_name: RegionOne
  other:
    auth_type: v3applicationcredential
    auth:
      auth_url: https://other.example/v3
      application_credential_id: ac-1
      application_credential_secret: %s
`, authURL, plantedPassword, plantedAppCred)
}

// withCredentials puts the planted user information, and the planted
// query string when query is set, on a server's identity URL. Without a
// query gophercloud posts the password to <url>/auth/tokens at once; with
// one, the URL does not end in a version and it asks for the versions
// first.
func withCredentials(base string, query bool) string {
	u := strings.Replace(base, "http://", "http://capo:"+plantedUserinfo+"@", 1) + "/v3"
	if query {
		u += "?token=" + plantedQuery
	}
	return u
}

func checkNoSecrets(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range []string{plantedPassword, plantedUserinfo, plantedQuery, plantedAppCred, "capo:"} {
		if strings.Contains(text, s) {
			t.Errorf("%s holds %q: %s", what, s, text)
		}
	}
}

// TestConnectErrorsHoldNoSecrets authenticates against an identity
// endpoint, a local HTTP server, that answers 400 with the request it was
// sent (the password in it) and a kilobyte more, as a service or a proxy
// in front of it may; and against one that does not answer at all. The
// auth_url carries a password and a token. Each error says what failed,
// where (the URL redacted) and how the server answered (cut short), and
// holds none of the secrets; the 400 is retryable, a refusal terminal.
func TestConnectErrorsHoldNoSecrets(t *testing.T) {
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error": {"code": 400, "message": "bad request: %s %s", "request": %s, "padding": %q}}`,
			r.Method, r.URL, body, strings.Repeat("x", 1024))
	}))
	defer echo.Close()
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error": {"code": 401, "message": "The request you have made requires authentication.", "url": %q}}`, r.URL)
	}))
	defer refuse.Close()
	// A port nothing listens on: the connection is refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name     string
		base     string
		query    bool
		want     []string
		terminal bool
	}{
		{"400 echoing the request", echo.URL, false, []string{"authenticate to cloud \"openstack\" at http://***@127.0.0.1:",
			"POST http://***@127.0.0.1:", "got 400 instead", `"password":"***"`, "…"}, false},
		{"400 to the version discovery", echo.URL, true, []string{"/v3?***: ", "GET http://***@127.0.0.1:", "got 400 instead", "…"}, false},
		{"401", refuse.URL, false, []string{"as \"capo\"", ErrAuth.Error()}, true},
		{"connection refused", closed, true, []string{"authenticate to cloud \"openstack\" at http://***@127.0.0.1:", "/v3?***: ", "connection refused"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			creds, err := CredentialsFromSecret(map[string][]byte{CloudsKey: plantedClouds(withCredentials(tc.base, tc.query))}, "openstack")
			if err != nil {
				t.Fatal(err)
			}
			_, err = Connect(ctx, creds)
			if err == nil {
				t.Fatal("Connect succeeded")
			}
			msg := err.Error()
			t.Logf("Connect: %s", msg)
			checkNoSecrets(t, "the error", msg)
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("the error does not say %q: %s", w, msg)
				}
			}
			if len(msg) > 2*maxErrorBody+300 {
				t.Errorf("the error is %d bytes; the server's answer is not cut short: %s", len(msg), msg)
			}
			if failure.IsTerminal(err) != tc.terminal {
				t.Errorf("terminal = %v, want %v: %v", failure.IsTerminal(err), tc.terminal, err)
			}
			if tc.terminal && !errors.Is(err, ErrAuth) {
				t.Errorf("a refusal does not wrap ErrAuth: %v", err)
			}
		})
	}
}
