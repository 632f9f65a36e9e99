package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is one child process of a run, its stdout and stderr in one log file.
type proc struct {
	name    string
	path    string
	args    []string
	env     []string
	logPath string

	cmd    *exec.Cmd
	exited chan struct{}
}

// start launches the process in its own process group.
func (p *proc) start() error {
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
	p.cmd, p.exited = cmd, make(chan struct{})
	go func() { // ends when the process does; stop waits for it
		_ = cmd.Wait()
		_ = f.Close()
		close(p.exited)
	}()
	return nil
}

// pid is the process id, 0 when not started.
func (p *proc) pid() int {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// alive reports whether the process was started and has not exited.
func (p *proc) alive() bool {
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

// stop sends SIGTERM to the process (by its pid) and waits up to grace before SIGKILL.
func (p *proc) stop(grace time.Duration) {
	if !p.alive() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// status reads a "kB" field of /proc/<pid>/status (VmHWM, VmRSS) in bytes; 0 when unknown.
func (p *proc) status(field string) int64 {
	if !p.alive() {
		return 0
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.pid()))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// cpuTime is the process's user+system CPU time so far (from /proc/<pid>/stat); 0 when unknown.
func (p *proc) cpuTime() time.Duration {
	if !p.alive() {
		return 0
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid()))
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces: count from its end.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 13 {
		return 0
	}
	// f[0] is field 3 (state): utime and stime are fields 14 and 15.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / ticks
}

// logContains reports whether the process's log holds s.
func (p *proc) logContains(s string) bool {
	raw, err := os.ReadFile(p.logPath)
	return err == nil && bytes.Contains(raw, []byte(s))
}
