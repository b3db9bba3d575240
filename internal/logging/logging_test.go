package logging

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestFromWith: a logger put in a context comes back out, with what Attach
// added; a context without one gives slog's default.
func TestFromWith(t *testing.T) {
	if From(t.Context()) != slog.Default() {
		t.Error("From(a context without a logger) is not slog.Default()")
	}
	var buf bytes.Buffer
	ctx := With(t.Context(), slog.New(slog.NewTextHandler(&buf, nil)))
	ctx = Attach(ctx, "plan", "capi-quickstart")
	From(ctx).Info("planned", "steps", 3)
	if got := buf.String(); !strings.Contains(got, "msg=planned plan=capi-quickstart steps=3") {
		t.Errorf("logged %q; want the attached plan before the line's own attributes", got)
	}
}
