package logging

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/ferry-dev/ferry/internal/redact"
)

// Redacting returns a handler that passes everything it is given to h
// through redact.Scrub first: the message, every string attribute, every
// error attribute (as its scrubbed message), and any other value whose
// printed form holds something Scrub masks (as that printed form,
// scrubbed). It is the handler the process logs through
// (docs/architecture.md's safety rule that no secret appears in a log):
// a line is checked when it is written, against the secrets registered
// by then.
//
// Attributes added with WithAttrs are scrubbed once, when they are
// added; they say what a line concerns (a plan, a phase, a step), not what
// went wrong.
func Redacting(h slog.Handler) slog.Handler {
	if r, ok := h.(*redacting); ok {
		return r
	}
	return &redacting{next: h}
}

type redacting struct{ next slog.Handler }

func (h *redacting) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *redacting) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, redact.Scrub(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(scrubAttr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *redacting) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = scrubAttr(a)
	}
	return &redacting{next: h.next.WithAttrs(clean)}
}

func (h *redacting) WithGroup(name string) slog.Handler {
	return &redacting{next: h.next.WithGroup(name)}
}

// scrubAttr returns a with its value scrubbed. A value is resolved first
// (slog.LogValuer), so that what it logs as is what is checked.
func scrubAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, redact.Scrub(v.String()))
	case slog.KindGroup:
		group := v.Group()
		clean := make([]slog.Attr, len(group))
		for i, g := range group {
			clean[i] = scrubAttr(g)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(clean...)}
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			// Both of slog's handlers print an error as its message.
			return slog.String(a.Key, redact.Scrub(err.Error()))
		}
		p := printed(v.Any())
		if clean := redact.Scrub(p); clean != p {
			return slog.String(a.Key, clean)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// printed is how slog's text handler prints x; empty when printing it
// panics (a nil pointer's String method), which the handler reports in
// its own way.
func printed(x any) (s string) {
	defer func() {
		if recover() != nil {
			s = ""
		}
	}()
	switch x := x.(type) {
	case fmt.Stringer:
		return x.String()
	case []byte:
		return string(x)
	}
	return fmt.Sprintf("%+v", x)
}
