package failure

import (
	"errors"
	"fmt"
	"testing"
)

func TestTerminal(t *testing.T) {
	cause := errors.New("401 Unauthorized")
	wrapped := fmt.Errorf("authenticate to cloud openstack: %w", Terminal(cause))
	if !IsTerminal(wrapped) || !errors.Is(wrapped, cause) {
		t.Errorf("IsTerminal(%v) = false or cause lost", wrapped)
	}
	if IsTerminal(errors.New("connection refused")) || IsTerminal(nil) {
		t.Errorf("plain errors must be retryable")
	}
	if Terminal(nil) != nil {
		t.Errorf("Terminal(nil) != nil")
	}
	if joined := errors.Join(errors.New("timeout"), Terminal(cause)); !IsTerminal(joined) {
		t.Errorf("a group with a terminal error is terminal")
	}
}
