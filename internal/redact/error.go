package redact

import "errors"

// Error returns err unchanged when Scrub leaves its message as it is, and
// otherwise an error whose message is the scrubbed one, with each of
// extra (values known to be in play for this error, at least 4 bytes
// long) masked as well, in each form Register knows (a Secret's value
// that an API server's refusal quotes in base64, say). The scrubbed
// error answers errors.Is and errors.As for the original, so that
// failure.IsTerminal and a check for a status code still see it, but it
// does not unwrap to it, so that no caller can print the original by
// accident. nil stays nil.
func Error(err error, extra ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := scrub(msg, extra)
	if clean == msg {
		return err
	}
	return &scrubbedError{msg: clean, err: err}
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }

// Is lets errors.Is see the original error.
func (e *scrubbedError) Is(target error) bool { return errors.Is(e.err, target) }

// As lets errors.As see the original error.
func (e *scrubbedError) As(target any) bool { return errors.As(e.err, target) }
