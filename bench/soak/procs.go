package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// attemptsFlag is the flag of `proxbus serve` that bounds a command's failed attempts:
// --max-attempts, or on a proxbus that predates it --max-deliver (the consumer's MaxDeliver).
// It reads the flags from `proxbus serve -h`.
func attemptsFlag(ctx context.Context, proxbus string) (string, error) {
	out, _ := exec.CommandContext(ctx, proxbus, "serve", "-h").CombinedOutput() // -h may exit non-zero
	switch {
	case strings.Contains(string(out), "-max-attempts"):
		return "--max-attempts", nil
	case strings.Contains(string(out), "-max-deliver"):
		return "--max-deliver", nil
	}
	return "", fmt.Errorf("proxbus serve -h names neither --max-attempts nor --max-deliver")
}

// proc is a restartable child process whose stdout and stderr are appended to one log file
// (every incarnation's output is kept, so the leak scan sees all of it).
type proc struct {
	name    string
	path    string
	args    []string
	env     []string
	logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	starts int
	kills  int
}

// errNotRunning is returned by kill when the process is not running.
var errNotRunning = errors.New("not running")

// start launches the process; it must not be running.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.exited: // it ended on its own: start it again
		default:
			return fmt.Errorf("%s: already running", p.name)
		}
	}
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("%s: log: %w", p.name, err)
	}
	cmd := exec.Command(p.path, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("%s: start: %w", p.name, err)
	}
	exited := make(chan struct{})
	go func() { // owned by proc: stop/kill wait for exited
		_ = cmd.Wait()
		_ = f.Close()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
	p.starts++
	return nil
}

// signal sends sig and waits for the process to exit (SIGKILL after grace).
func (p *proc) signal(sig syscall.Signal, grace time.Duration) error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.cmd = nil
	if cmd != nil && sig == syscall.SIGKILL {
		p.kills++
	}
	p.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("%s: %w", p.name, errNotRunning)
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-exited
	}
	return nil
}

// kill SIGKILLs the process and waits for it.
func (p *proc) kill() error { return p.signal(syscall.SIGKILL, 5*time.Second) }

// stop sends SIGTERM and waits up to grace before SIGKILL.
func (p *proc) stop(grace time.Duration) error { return p.signal(syscall.SIGTERM, grace) }

// running reports whether the process was started and not yet stopped by us.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// counts returns how often the process was started and SIGKILLed.
func (p *proc) counts() (starts, kills int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts, p.kills
}
