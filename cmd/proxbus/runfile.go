package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/proxbus/proxbus/internal/app"
)

// runDirEnv names the directory that holds the run file of `proxbus dev`, instead of the
// default (see [runDir]).
const runDirEnv = "PROXBUS_RUN_DIR"

// devRun is the run file of a running `proxbus dev`: where its services listen, the prefixes
// it uses and its process id. The other subcommands use it when they were given no URL.
type devRun struct {
	PID            int    `json:"pid"`
	NATSURL        string `json:"nats_url"`
	RedisURL       string `json:"redis_url"`
	SubjectPrefix  string `json:"subject_prefix"`
	RedisKeyPrefix string `json:"redis_key_prefix"`
	PVEURL         string `json:"pve_url"`
	NetBoxURL      string `json:"netbox_url"`
}

// runDir is the directory of the run file: $PROXBUS_RUN_DIR, else $XDG_RUNTIME_DIR/proxbus,
// else proxbus-<uid> in the temporary directory.
func runDir(getenv func(string) string) string {
	if d := getenv(runDirEnv); d != "" {
		return d
	}
	if d := getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "proxbus")
	}
	return sharedRunDir()
}

// sharedRunDir is the run directory in the temporary directory, which other users share.
func sharedRunDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("proxbus-%d", os.Getuid()))
}

// devRunPath is the path of the run file of `proxbus dev`.
func devRunPath(getenv func(string) string) string {
	return filepath.Join(runDir(getenv), "dev.json")
}

// privateDir returns an error unless dir is a directory (not a symbolic link) that neither
// its group nor others may write to and, in the shared temporary directory, may not use at
// all (so that one another user created is never read): only then is a run file in it the
// user's own.
func privateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	open := os.FileMode(0o022)
	if filepath.Clean(dir) == sharedRunDir() {
		open = 0o077
	}
	if fi.Mode().Perm()&open != 0 {
		return fmt.Errorf("%s is open to other users (mode %v); make it 0700", dir, fi.Mode().Perm())
	}
	return nil
}

// writeDevRun writes r to path atomically (a file of mode 0600 renamed into place), creating
// its directory with mode 0700 when missing.
func writeDevRun(path string, r devRun) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("run file: %w", err)
	}
	if err := privateDir(dir); err != nil {
		return fmt.Errorf("run file: %w", err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("run file: %w", err)
	}
	f, err := os.CreateTemp(dir, ".dev-*.json") // mode 0600
	if err != nil {
		return fmt.Errorf("run file: %w", err)
	}
	_, werr := f.Write(append(b, '\n'))
	if err := errors.Join(werr, f.Close()); err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("run file: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("run file: %w", err)
	}
	return nil
}

// removeDevRun removes the run file at path when it is still that of process pid (a later
// `proxbus dev` may have replaced it).
func removeDevRun(path string, pid int) {
	if r, err := readRunFile(path); err == nil && r.PID == pid {
		_ = os.Remove(path)
	}
}

// readRunFile reads the run file at path, in a private directory.
func readRunFile(path string) (devRun, error) {
	var r devRun
	if err := privateDir(filepath.Dir(path)); err != nil {
		return r, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("run file %s: %w", path, err)
	}
	return r, nil
}

// liveDevRun is the run file at path when the `proxbus dev` that wrote it is still running.
// A file whose process is gone is stale: it is removed and ok is false.
func liveDevRun(path string) (r devRun, ok bool) {
	r, err := readRunFile(path)
	if err != nil {
		return devRun{}, false
	}
	if !processAlive(r.PID) {
		_ = os.Remove(path)
		return devRun{}, false
	}
	return r, true
}

// processAlive reports whether process pid exists (signal 0 reaches it, or may not be sent
// to it).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	defer p.Release()
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}

// natsFromDev points *natsURL, and *subjectPrefix unless it was given, at the NATS of a
// running `proxbus dev` when --nats-url was given neither on the command line nor by
// $PROXBUS_NATS_URL, and says so on e's stderr. Without a live run file it says that it uses
// the default URL, and where it looked for dev's run file.
func (e *cliEnv) natsFromDev(natsURL, subjectPrefix *string) {
	if e.explicit("nats-url") {
		return
	}
	path := devRunPath(e.getenv)
	r, ok := liveDevRun(path)
	if !ok || r.NATSURL == "" {
		fmt.Fprintln(e.stderr, sanitizeLine(fmt.Sprintf("using NATS at %s (the --nats-url default: no proxbus dev is running, no run file at %s)",
			app.RedactURL(*natsURL), path)))
		return
	}
	*natsURL = r.NATSURL
	if subjectPrefix != nil && r.SubjectPrefix != "" && !e.explicit("subject-prefix") {
		*subjectPrefix = r.SubjectPrefix
	}
	fmt.Fprintln(e.stderr, sanitizeLine(fmt.Sprintf("using proxbus dev's NATS at %s (from %s)", app.RedactURL(r.NATSURL), path)))
}

// redisFromDev is [cliEnv.natsFromDev] for --redis-url and --redis-key-prefix.
func (e *cliEnv) redisFromDev(redisURL, keyPrefix *string) {
	if e.explicit("redis-url") {
		return
	}
	path := devRunPath(e.getenv)
	r, ok := liveDevRun(path)
	if !ok || r.RedisURL == "" {
		fmt.Fprintln(e.stderr, sanitizeLine(fmt.Sprintf("using Redis at %s, key prefix %q (the --redis-url default: no proxbus dev is running, no run file at %s)",
			app.RedactURL(*redisURL), *keyPrefix, path)))
		return
	}
	*redisURL = r.RedisURL
	if keyPrefix != nil && r.RedisKeyPrefix != "" && !e.explicit("redis-key-prefix") {
		*keyPrefix = r.RedisKeyPrefix
	}
	fmt.Fprintln(e.stderr, sanitizeLine(fmt.Sprintf("using proxbus dev's Redis at %s, key prefix %q (from %s)", app.RedactURL(r.RedisURL), *keyPrefix, path)))
}

// errDevRunning: a `proxbus dev` is running already with the run file this one would write.
var errDevRunning = errors.New("another proxbus dev is running")

// claimDevRun refuses when the run file at path belongs to a live `proxbus dev` other than
// process pid: a second dev would replace it, and the first one's clients would follow the
// second (then nothing, once it ends).
func claimDevRun(path string, pid int) error {
	r, ok := liveDevRun(path)
	if !ok || r.PID == pid {
		return nil
	}
	return fmt.Errorf("%w (pid %d, NATS at %s, run file %s): stop it first, or give this one a run directory of its own with PROXBUS_RUN_DIR=DIR (its clients then need the same PROXBUS_RUN_DIR)",
		errDevRunning, r.PID, app.RedactURL(r.NATSURL), path)
}
