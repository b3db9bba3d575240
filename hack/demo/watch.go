package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ferry-dev/ferry/internal/status"
)

// statusWatch is `reconciler status PLAN --watch` running beside a
// phase, as a team follows one from a terminal or a CI job: not in a
// terminal, it prints one line per change and exits once no phase is in
// progress, 0 when none failed or is blocked.
type statusWatch struct {
	cmd     *exec.Cmd
	out     *syncBuffer
	done    chan error
	started chan struct{} // closed once cmd started, or failed to
}

// syncBuffer is a buffer that the command writes while the demo reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// watchStatus starts `reconciler status --watch` on the world's plan
// once the status shows phase approved: before the reconciler has seen the
// merge, no phase is in progress, and the watch would end at once.
func (w *world) watchStatus(ctx context.Context, phase string) *statusWatch {
	args := append([]string{"status", w.sc.cluster, "--watch", "--watch-interval", "1s"}, w.forge.remote().flags()...)
	sw := &statusWatch{cmd: exec.CommandContext(ctx, w.bin, args...), out: &syncBuffer{}, done: make(chan error, 1), started: make(chan struct{})}
	sw.cmd.Stdout, sw.cmd.Stderr = sw.out, sw.out
	// A store of its own: w.reader's clone is not for two readers at once.
	reader := w.forge.remote().store(filepath.Join(w.dir, "watch-"+phase))
	go func() {
		defer close(sw.started)
		for ctx.Err() == nil {
			if st, err := reader.Read(ctx, w.sc.cluster); err == nil && st.Phase(phase) != nil && st.Phase(phase).State != status.PhasePending {
				break
			}
			sleep(ctx, 200*time.Millisecond)
		}
		if err := sw.cmd.Start(); err != nil {
			sw.done <- err
			return
		}
		go func() { sw.done <- sw.cmd.Wait() }()
	}()
	return sw
}

// end waits for the watch to end after its phase did (succeeded says
// whether the phase ended; a phase waiting at an approval gate is still
// in progress, so the watch goes on and is stopped here), shows its lines,
// and fails when it exited otherwise than 0 or did not end.
func (sw *statusWatch) end(ctx context.Context, out *display, phase string, succeeded bool) error {
	if sw == nil {
		return nil
	}
	<-sw.started
	var err error
	exited := false
	if succeeded {
		select {
		case err = <-sw.done:
			exited = true
		case <-time.After(time.Minute):
			err = errors.New("still running a minute after the phase succeeded")
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if !exited && sw.cmd.Process != nil {
		_ = sw.cmd.Process.Kill()
		<-sw.done //nolint:errcheck // the error of a process killed on purpose
	}
	lines := strings.TrimRight(sw.out.String(), "\n")
	out.say("    `reconciler status %s --watch` followed phase %s:\n      %s", strings.Join(sw.cmd.Args[2:3], ""), phase, strings.ReplaceAll(lines, "\n", "\n      "))
	if err != nil {
		return fmt.Errorf("reconciler status --watch during phase %s: %w", phase, err)
	}
	return nil
}
