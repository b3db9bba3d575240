package logging

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/ferry-dev/ferry/internal/redact"
)

type creds struct{ User, Password string }

type valuer struct{ s string }

func (v valuer) LogValue() slog.Value { return slog.StringValue(v.s) }

// TestRedacting: through the wrapper, no registered secret, URL
// credentials or query string reaches the line, in the message or in any
// kind of attribute (string, error, struct, LogValuer, group, WithAttrs),
// with the text handler and the JSON one; what is not secret is left as
// it is.
func TestRedacting(t *testing.T) {
	const secret = "logging-test-s3cret-Pa55"
	redact.Register(secret)
	url := "https://admin:" + secret + "@keystone.example/v3?token=query-t0ken"
	for name, build := range map[string]func(*bytes.Buffer) slog.Handler{
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		var buf bytes.Buffer
		log := slog.New(Redacting(build(&buf))).With("auth_url", url)
		log.WithGroup("g").Info("connect to "+url+" failed",
			"error", fmt.Errorf("authenticate: %w", errors.New("400: {\"password\": \""+secret+"\"}")),
			"creds", creds{User: "capo", Password: secret},
			"valuer", valuer{secret},
			slog.Group("inner", "url", url),
			"steps", 3)
		got := buf.String()
		for _, leak := range []string{secret, "admin:", "query-t0ken"} {
			if strings.Contains(got, leak) {
				t.Errorf("%s: the line holds %q: %s", name, leak, got)
			}
		}
		for _, kept := range []string{"https://***@keystone.example/v3?***", "authenticate: 400", "capo", "steps", "3"} {
			if !strings.Contains(got, kept) {
				t.Errorf("%s: the line lost %q: %s", name, kept, got)
			}
		}
	}
	if h := Redacting(slog.NewTextHandler(&bytes.Buffer{}, nil)); Redacting(h) != h {
		t.Error("Redacting wraps a handler that already redacts")
	}
}
