package failure

import "errors"

// TerminalError marks an error that retrying will not fix.
type TerminalError struct {
	Err error
}

func (e *TerminalError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *TerminalError) Unwrap() error { return e.Err }

// Terminal marks err as terminal; nil stays nil.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return &TerminalError{Err: err}
}

// IsTerminal reports whether err, or any error it wraps, is terminal.
func IsTerminal(err error) bool {
	var t *TerminalError
	return errors.As(err, &t)
}
