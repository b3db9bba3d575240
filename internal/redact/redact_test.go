package redact

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

// TestScrubURLs: a URL's user information and query string go, wherever
// the URL stands in the text; what is around it stays.
func TestScrubURLs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://user:pa55@keystone/v3?token=x", "https://***@keystone/v3?***"},
		{`auth_url "https://user:pa55@keystone/v3?token=x": bad`, `auth_url "https://***@keystone/v3?***": bad`},
		{"Post \"http://user:***@127.0.0.1:1/v3/auth/tokens?token=x\": dial tcp: refused",
			"Post \"http://***@127.0.0.1:1/v3/auth/tokens?***\": dial tcp: refused"},
		{"[POST http://u:p@h:5000/v3?token=x/auth/tokens], but got 400", "[POST http://***@h:5000/v3?***], but got 400"},
		{"get https://admin:s3cret-token@keystone.example:5000/v3: timeout", "get https://***@keystone.example:5000/v3: timeout"},
		{"see https://ghp_abcdef@github.com/org/plans.git.", "see https://***@github.com/org/plans.git."},
		{"(at http://[::1]:5000/v3?a=b)", "(at http://[::1]:5000/v3?***)"},
		{"https://keystone.example:5000/v3#access_token=abc", "https://keystone.example:5000/v3#***"},
		{"no URL here: user:pass@host", "no URL here: user:pass@host"},
		{"https://github.com/org/plans.git and file:///srv/git/plans.git", "https://github.com/org/plans.git and file:///srv/git/plans.git"},
		{"a path with @ after it: https://host/org/@scope/pkg", "a path with @ after it: https://host/org/@scope/pkg"},
		{"https://host/v3?", "https://host/v3?"},
	} {
		got := Scrub(tc.in)
		if got != tc.want {
			t.Errorf("Scrub(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
		if again := Scrub(got); again != got {
			t.Errorf("Scrub is not idempotent: %q, then %q", got, again)
		}
	}
}

// TestScrubSecretFields: what Keystone or a proxy echoes of an
// authentication request loses the secrets' values, registered or not.
func TestScrubSecretFields(t *testing.T) {
	body := `{"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "capo", "password": "unregistered \"pw\"", "domain": {"name": "Default"}}}}}, ` +
		`"application_credential": {"id": "ac-1", "secret": "ac-s3cret"}, "Token":"t0k"}`
	got := Scrub(body)
	for _, leak := range []string{"unregistered", `\"pw\"`, "ac-s3cret", "t0k"} {
		if strings.Contains(got, leak) {
			t.Errorf("Scrub left %q in %s", leak, got)
		}
	}
	for _, kept := range []string{`"methods": ["password"]`, `"name": "capo"`, `"password": "***"`, `"id": "ac-1"`, `"secret": "***"`, `"Token":"***"`} {
		if !strings.Contains(got, kept) {
			t.Errorf("Scrub lost %s: %s", kept, got)
		}
	}
}

// TestRegister: a registered value is masked in any text, as it is and in
// the forms it takes once quoted (JSON, a URL's query, Go's %q, base64,
// also of the value as given, white space and all); a value
// shorter than MinLen is not registered; a longer secret that contains a
// shorter one is masked whole.
func TestRegister(t *testing.T) {
	t.Cleanup(global.reset)
	global.reset()
	if got := Scrub("nothing registered"); got != "nothing registered" {
		t.Fatalf("Scrub = %q", got)
	}
	Register("pa55", "  s3cr3t-pa55w0rd\n", `we"ird&pass word`, "s3cr3t-pa55w0rd-longer", "")
	for _, tc := range []struct{ in, want string }{
		{"login failed for s3cr3t-pa55w0rd", "login failed for ***"},
		{"s3cr3t-pa55w0rd-longer!", "***!"},
		{`{"password": ` + fmt.Sprintf("%q", `we"ird&pass word`) + `}`, `{"password": "***"}`},
		{`body {"pw":"we\"ird\u0026pass word"}`, `body {"pw":"***"}`},
		{"q=we%22ird%26pass+word&x=1", "q=***&x=1"},
		{`"data": {"key": "czNjcjN0LXBhNTV3MHJk"}`, `"data": {"key": "***"}`},
		{`"data": {"key": "ICBzM2NyM3QtcGE1NXcwcmQK"}`, `"data": {"key": "***"}`},
		{"short pa55 stays", "short pa55 stays"},
	} {
		if got := Scrub(tc.in); got != tc.want {
			t.Errorf("Scrub(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
	}
	// Registering again builds nothing new.
	before := global.replacer.Load()
	Register("s3cr3t-pa55w0rd")
	if global.replacer.Load() != before {
		t.Error("registering a known value rebuilt the Replacer")
	}
}

// TestRegisterInBase64: a registered password inside a longer text that
// is quoted in base64 (a Secret's clouds.yaml, as a refusal that shows the
// object carries it) is masked at whatever offset it starts: no run of
// what is left decodes, at any alignment, to text holding it.
func TestRegisterInBase64(t *testing.T) {
	t.Cleanup(global.reset)
	global.reset()
	const password = "s3cr3t-pa55w0rd"
	Register(password)
	for pad := range 6 {
		yaml := "clouds:\n  ferry:\n    auth:\n      password: " + strings.Repeat("x", pad) + password + "\n      project_name: demo\n"
		encoded := base64.StdEncoding.EncodeToString([]byte(yaml))
		got := Scrub(`"data": {"clouds.yaml": "` + encoded + `"}`)
		if !strings.Contains(got, Mask) {
			t.Errorf("offset %d: nothing masked in %s", pad, got)
		}
		for _, run := range strings.Split(got, Mask) {
			for cut := range 4 {
				if cut > len(run) {
					break
				}
				b64 := strings.Trim(run[cut:], `"{}: `)
				b64 = b64[:len(b64)/4*4]
				if raw, err := base64.StdEncoding.DecodeString(b64); err == nil && strings.Contains(string(raw), password) {
					t.Errorf("offset %d: %q decodes to the password", pad, b64)
				}
			}
		}
	}
}

// TestRegistryBound: past maxValues the oldest values go.
func TestRegistryBound(t *testing.T) {
	t.Cleanup(global.reset)
	global.reset()
	Register("first-secret-value")
	for i := range maxValues {
		Register(fmt.Sprintf("value-%06d", i))
	}
	if len(global.values) > maxValues || len(global.seen) != len(global.values) {
		t.Errorf("%d values, %d seen; want at most %d", len(global.values), len(global.seen), maxValues)
	}
	if Scrub("first-secret-value") != "first-secret-value" || Scrub(fmt.Sprintf("value-%06d", maxValues-1)) != Mask {
		t.Error("the oldest value is still masked, or the newest is not")
	}
}

// TestError: a scrubbed error keeps answering errors.Is and errors.As for
// the original but does not unwrap to it; one with nothing to scrub is
// returned as it is.
func TestError(t *testing.T) {
	t.Cleanup(global.reset)
	global.reset()
	Register("registered-s3cret")
	cause := &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrNotExist}
	err := Error(fmt.Errorf("fetch https://tok@host/repo with registered-s3cret and extra-val: %w", cause), "extra-val", "ab")
	if got := err.Error(); got != "fetch https://***@host/repo with *** and ***: open /x: file does not exist" {
		t.Errorf("Error() = %q", got)
	}
	var pe *fs.PathError
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) {
		t.Error("the scrubbed error hides the original from errors.Is or errors.As")
	}
	if errors.Unwrap(err) != nil {
		t.Error("the scrubbed error unwraps to the original")
	}
	// A Secret's value in play, quoted by an API server as the object
	// carries it (base64), is masked whole, though it holds a registered
	// value and another that is not.
	cloudsYAML := "clouds:\n  openstack:\n    auth:\n      password: registered-s3cret\n      token: not-registered\n"
	refused := fmt.Errorf(`admission webhook denied the request: {"data": {"clouds.yaml": %q}}; also %q`,
		base64.StdEncoding.EncodeToString([]byte(cloudsYAML)), cloudsYAML)
	if got := Error(refused, cloudsYAML).Error(); got != `admission webhook denied the request: {"data": {"clouds.yaml": "***"}}; also "***"` {
		t.Errorf("Error() = %q", got)
	}
	plain := errors.New("nothing secret")
	if Error(plain) != plain || Error(nil) != nil { //nolint:errorlint // the very same error, not one that wraps it
		t.Error("an error with nothing to scrub, or nil, was replaced")
	}
}

// TestExcerpt: a long body is scrubbed, then cut on a rune boundary, and
// kept on one line.
func TestExcerpt(t *testing.T) {
	body := []byte("{\"error\":\n  {\"password\": \"" + strings.Repeat("p", 300) + "\", \"message\": \"" + strings.Repeat("é", 200) + "\"}}")
	got := Excerpt(body, 100)
	if len(got) > 100 || strings.Contains(got, "ppp") || strings.Contains(got, "\n") || !strings.HasSuffix(got, "…") {
		t.Errorf("Excerpt = %q (%d bytes)", got, len(got))
	}
	if !strings.HasPrefix(got, `{"error": {"password": "***", "message": "éé`) {
		t.Errorf("Excerpt = %q", got)
	}
	if got := Excerpt([]byte(" short \n"), 100); got != "short" {
		t.Errorf("Excerpt(short) = %q", got)
	}
}
