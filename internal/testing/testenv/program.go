package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// Program is a T for a program that runs the test environment outside a
// test (the demo, the benchmark): cleanups run in reverse order at Close,
// Fatal ends the function Do runs, Logf lines go to the log function.
type Program struct {
	log      func(format string, args ...any)
	mu       sync.Mutex
	cleanups []func()
	dirs     []string
	failed   error
}

var _ T = (*Program)(nil)

// NewProgram returns a Program that logs through log.
func NewProgram(log func(format string, args ...any)) *Program {
	return &Program{log: log}
}

// Do runs fn in a goroutine of its own, so that Fatal can end it with
// runtime.Goexit as the testing package does, and returns fn's error or the
// first one Fatal or Errorf recorded.
func (p *Program) Do(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		ok := false
		defer func() {
			if !ok {
				p.mu.Lock()
				defer p.mu.Unlock()
				done <- p.failed
			}
		}()
		err := fn()
		ok = true
		p.mu.Lock()
		if err == nil {
			err = p.failed
		}
		p.mu.Unlock()
		done <- err
	}()
	return <-done
}

// Close runs the cleanups, newest first, and removes the temporary
// directories.
func (p *Program) Close() {
	p.mu.Lock()
	fns, dirs := p.cleanups, p.dirs
	p.cleanups, p.dirs = nil, nil
	p.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}

func (p *Program) Helper() {}

func (p *Program) Cleanup(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cleanups = append(p.cleanups, f)
}

func (p *Program) TempDir() string {
	d, err := os.MkdirTemp("", "ferry-")
	if err != nil {
		p.Fatalf("temporary directory: %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dirs = append(p.dirs, d)
	return d
}

func (p *Program) Logf(format string, args ...any) { p.log(format, args...) }

func (p *Program) Errorf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failed == nil {
		p.failed = fmt.Errorf(format, args...)
	}
}

// Failed reports whether Errorf or Fatalf was called.
func (p *Program) Failed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed != nil
}

func (p *Program) Fatal(args ...any) { p.Fatalf("%s", fmt.Sprint(args...)) }

func (p *Program) Fatalf(format string, args ...any) {
	p.Errorf(format, args...)
	runtime.Goexit()
}

// StartProcess runs bin with args until p closes, its output in logFile,
// in a process group of its own (so that Ctrl-C reaches the program, which
// stops it): at Close it gets SIGTERM, to shut down as in production, and
// SIGKILL 15 seconds later. env is added to this process's environment.
// It returns the process ID.
func (p *Program) StartProcess(bin string, args []string, logFile string, env ...string) (int, error) {
	if err := os.MkdirAll(filepath.Dir(logFile), 0o755); err != nil {
		return 0, err
	}
	log, err := os.Create(logFile)
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return 0, fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		log.Close()
	})
	return cmd.Process.Pid, nil
}
