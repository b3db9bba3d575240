package logging

import (
	"context"
	"log/slog"
)

type key struct{}

// With returns ctx carrying l.
func With(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, key{}, l)
}

// From returns the logger ctx carries; slog.Default() when it carries none.
func From(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(key{}).(*slog.Logger); ok && l != nil {
		return l
	}
	return slog.Default()
}

// Attach returns ctx carrying its logger with args added: every line
// logged through the result says what it concerns.
func Attach(ctx context.Context, args ...any) context.Context {
	return With(ctx, From(ctx).With(args...))
}
