package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/ferry-dev/ferry/internal/logging"
)

// UsageError is an error in how a command was called (a missing flag, a
// path that cannot be read, a bad value): the command line must change.
// The binary exits 2 on it, and 1 on any other error.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// usageErrorf returns a UsageError with a formatted message.
func usageErrorf(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// IsUsageError says whether err, or an error it wraps, is a UsageError.
func IsUsageError(err error) bool {
	var u *UsageError
	return errors.As(err, &u)
}

// Streams are where a command writes: its data to Out, its log, notes and
// problems to ErrOut, at LogLevel and above, as LogFormat.
type Streams struct {
	Out, ErrOut io.Writer
	LogLevel    slog.Level
	LogFormat   string // LogText (the zero value) or LogJSON
	// Process: the streams are the process's own (main sets it), so the
	// command's logger also becomes controller-runtime's global one, which
	// otherwise prints a stack trace saying it was never set. Tests leave
	// it false: they run commands side by side in one process.
	Process bool
}

// Log formats (--log-format).
const (
	LogText = "text"
	LogJSON = "json"
)

// ParseLog checks the values of --log-level (debug, info, warn, error)
// and --log-format (text, json).
func ParseLog(level, format string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return 0, usageErrorf("--log-level %q: want debug, info, warn or error", level)
	}
	if format != LogText && format != LogJSON {
		return 0, usageErrorf("--log-format %q: want text or json", format)
	}
	return l, nil
}

// logger is the command's logger, writing to ErrOut.
func (s Streams) logger() *slog.Logger {
	opts := &slog.HandlerOptions{Level: s.LogLevel}
	var h slog.Handler = slog.NewTextHandler(s.ErrOut, opts)
	if s.LogFormat == LogJSON {
		h = slog.NewJSONHandler(s.ErrOut, opts)
	}
	// Every line is scrubbed of the secrets ferry knows (internal/redact),
	// controller-runtime's and klog's through the same handler.
	h = logging.Redacting(h)
	if s.Process {
		ctrllog.SetLogger(logr.FromSlogHandler(h))
		klog.SetLogger(logr.FromSlogHandler(h)) // client-go's reflectors and leader election
	}
	return slog.New(h)
}

// Output formats of the commands that print data (-o).
const (
	OutputText = "text"
	OutputJSON = "json"
	OutputYAML = "yaml"
)

// Outputs are the output formats, in the order help lists them.
var Outputs = []string{OutputText, OutputJSON, OutputYAML}

// checkOutput returns a UsageError unless format is one of Outputs.
func checkOutput(format string) error {
	switch format {
	case OutputText, OutputJSON, OutputYAML:
		return nil
	}
	return usageErrorf("-o %q: want text, json or yaml", format)
}

// write prints v to w in format: text through the text function, json
// indented, yaml through the json field names (so both read the same).
func write(w io.Writer, format string, v any, text func(io.Writer) error) error {
	switch format {
	case OutputJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case OutputYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return text(w)
}
